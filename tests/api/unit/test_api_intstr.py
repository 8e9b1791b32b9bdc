"""The one IntOrString resolver (lwsflow.controller.api.intstr) against upstream behaviour.

Upstream ``intstr.GetScaledValueFromIntOrPercent``: ints as given; a string must end in ``%``
(``"3"`` fails with "string is not a percentage"); percent scales the total with ``math.Ceil`` or
``math.Floor``. The LWS controller rounds maxSurge up and caps it at replicas, maxUnavailable down,
defaults 0 and 1 (lws-semantics §a, §d). The API models, the gate, the capacity planner, the sizing
step and the embedded cluster all resolve through this module, so one table covers them.
"""

from __future__ import annotations

import math

import pytest

from lwsflow.components.catalog import RolloutSettings
from lwsflow.components.sizing import check_rollout_budget
from lwsflow.controller.api import intstr
from lwsflow.controller.api.lws import LeaderWorkerSet
from lwsflow.controller.rollout import gate
from lwsflow.sim.lws_spec import view
from lwsflow.sim.rolling import RollingInput, surge_unavailable

# (value, total, round_up, expected)
SCALED = [
    (3, 10, True, 3), (3, 10, False, 3), (0, 5, True, 0),
    ("25%", 10, True, 3), ("25%", 10, False, 2),
    ("10%", 3, True, 1), ("10%", 3, False, 0),
    ("50%", 3, True, 2), ("50%", 3, False, 1), ("50%", 5, False, 2),
    ("100%", 7, False, 7), ("100%", 4, True, 4), ("0%", 5, True, 0),
    ("29%", 100, True, 29), ("29%", 100, False, 29),  # float(29)/100*100 = 28.999... with a naive float
    ("33%", 3, True, 1), ("33%", 3, False, 0), ("1%", 1, True, 1), ("1%", 1, False, 0),
    ("150%", 4, True, 6), ("+10%", 10, True, 1), ("-10%", 10, False, -1),  # strconv.Atoi reads a sign
]


@pytest.mark.parametrize(("value", "total", "up", "want"), SCALED)
def test_scaled_value_table(value: int | str, total: int, up: bool, want: int) -> None:
    assert intstr.scaled_value(value, total, round_up=up) == want


@pytest.mark.parametrize(("pct", "total"), [(p, t) for p in range(0, 101, 7) for t in range(0, 60, 11)])
def test_scaled_value_matches_float_ceil_floor(pct: int, total: int) -> None:
    """Upstream computes ``math.Ceil(float64(v) * float64(total) / 100)``; integers give the same."""
    exact = float(pct) * float(total) / 100
    assert intstr.scaled_value(f"{pct}%", total, round_up=True) == math.ceil(exact)
    assert intstr.scaled_value(f"{pct}%", total, round_up=False) == math.floor(exact)


@pytest.mark.parametrize("bad", ["3", "", "%", "25 %", " 25%", "2.5%", "abc", "25%%", True, 1.5, None])
def test_invalid_values_raise(bad: object) -> None:
    """``"3"`` is a string without ``%``: an error upstream, never read as 3."""
    with pytest.raises(ValueError):
        intstr.scaled_value(bad, 10, round_up=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "want"), [("25%", 25), ("0%", 0), ("100%", 100), ("-5%", None),
                                             ("+5%", None), ("5", None), ("5%%", None)])
def test_parse_percent_is_the_validation_form(value: str, want: int | None) -> None:
    """validation.IsValidPercent: digits and ``%`` only (what the webhooks accept)."""
    assert intstr.parse_percent(value) == want


# (maxSurge, maxUnavailable, replicas) -> (surge groups, unavailable groups) as the LWS controller uses
BUDGETS = [
    (None, None, 4, 0, 1), (1, 0, 4, 1, 0), ("25%", "25%", 4, 1, 1), ("30%", "30%", 4, 2, 1),
    ("10%", "10%", 3, 1, 0), (10, 2, 4, 4, 2), ("100%", "100%", 3, 3, 3), (0, 0, 0, 0, 0),
]


@pytest.mark.parametrize(("surge", "unavail", "r", "want_s", "want_u"), BUDGETS)
def test_lws_budget_agrees_everywhere(surge: int | str | None, unavail: int | str | None, r: int,
                                      want_s: int, want_u: int) -> None:
    """Surge rounds up and is capped at replicas, unavailable rounds down (§d), in every caller."""
    assert (intstr.max_surge(surge, r), intstr.max_unavailable(unavail, r)) == (want_s, want_u)
    ruc = {k: v for k, v in (("maxSurge", surge), ("maxUnavailable", unavail)) if v is not None}
    obj = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "m", "namespace": "default"},
           "spec": {"replicas": r,
                    "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": ruc},
                    "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {"containers": []}}}}}
    assert (gate.max_surge(obj), gate.max_unavailable(obj)) == (want_s, want_u)
    spec = LeaderWorkerSet.model_validate(obj).spec
    assert (spec.resolved_max_surge(), spec.resolved_max_unavailable()) == (want_s, want_u)
    sim_view = view(obj)
    assert (sim_view.surge, sim_view.unavailable) == (want_s, want_u)
    inp = RollingInput(replicas=r, max_unavailable=1 if unavail is None else unavail,
                       max_surge=0 if surge is None else surge, partition=0)
    assert surge_unavailable(inp) == (want_s, want_u)
    if r > 0 and (want_s or want_u):
        settings = RolloutSettings(maxSurge=0 if surge is None else surge,
                                   maxUnavailable=1 if unavail is None else unavail)
        assert check_rollout_budget(settings, r, "models[m].rollout") == (want_s, want_u)


def test_sim_refuses_a_percentless_string() -> None:
    """The embedded cluster used to read ``"3"`` as 3 (float parsing); upstream errors instead."""
    with pytest.raises(ValueError, match="percent"):
        surge_unavailable(RollingInput(replicas=4, max_unavailable="3", max_surge=0, partition=0))
