"""Cross-revision P/D compatibility: what the rollout does before it mixes revisions of a P/D target.

A staged rollout of a P/D pair (or a DisaggregatedSet under a router that pairs any prefill pod with
any decode pod) serves requests whose prefill ran on one revision and whose decode runs on the other.
vLLM refuses such a pair at the NIXL handshake when the two are incompatible (different vLLM versions,
KV-cache layouts, attention backends: vLLM PR #29503), and with ``kv_load_failure_policy=fail`` the
request fails. So before the first new group serves, a **probe** (a callable the caller wires: the
controller never speaks to engines; ``components/pd_probe.py`` is lwsflow's) hands KV off across
revisions both ways. When it fails the rollout never starts: it is refused with the blue-green
recommendation, or, with ``on_incompatible="all-at-once"``, each role is switched in one step (a full
surge of new groups, capacity checked first) instead of in stages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.clock import Clock

if TYPE_CHECKING:
    from lwsflow.controller.kube.client import Kube

REFUSE, ALL_AT_ONCE = "refuse", "all-at-once"
ON_INCOMPATIBLE = (REFUSE, ALL_AT_ONCE)
DS_NEEDS_MANIFEST = ("a DisaggregatedSet has no partition: once its new roles are applied (GitOps already "
                     "did) the DS controller mixes revisions, so the probe needs --manifest")


@dataclass(frozen=True)
class RoleRevision:
    """One role of the target: its new template and where its current (stable) pods are."""

    role: str  # prefill | decode
    template_owner: Obj  # anything with spec.leaderWorkerTemplate: the NEW template (an LWS or a DS role)
    stable_selector: str  # label selector of the role's serving pods now (the old revision)
    changed: bool  # the rollout changes this role's template


@dataclass(frozen=True)
class CompatContext:
    """What a probe gets: the target, its roles, the cluster clock and how long it may take."""

    kind: str  # LeaderWorkerSetPair | DisaggregatedSet
    namespace: str
    name: str
    roles: dict[str, RoleRevision]
    clock: Clock
    deadline_s: float
    # the connection the probe's requests go through (None: the probe's own): the in-cluster controller
    # gives its own, fenced on leadership, so a deposed leader creates and deletes no canary
    kube: Kube | None = None


@dataclass(frozen=True)
class CompatResult:
    """The probe's verdict. ``ran`` is False when it could not probe at all (``detail`` says why)."""

    ok: bool
    detail: str
    failed: list[str] = field(default_factory=list)  # directions, e.g. "new prefill -> old decode"
    checks: list[dict[str, object]] = field(default_factory=list)
    ran: bool = True


CompatProbe = Callable[[CompatContext], CompatResult]
Hint = Callable[[str, str], str]  # (cli target, namespace) -> the way forward a refusal recommends


def blue_green_hint(cli_target: str, namespace: str) -> str:
    """The recommendation every refusal carries: a new pool, traffic shifted by HTTPRoute weights."""
    return (f"roll it out as a new pool instead (blue-green: `lwsflow rollout run {cli_target} -n "
            f"{namespace} --manifest FILE --strategy blue-green`, traffic shifted by HTTPRoute weights), "
            "or pass --on-incompatible all-at-once to switch each role in one step (a full second copy "
            "of each role must fit)")


def policy_hint(cli_target: str, namespace: str) -> str:
    """The same recommendation for a RolloutPolicy (the in-cluster controller): its fields, not flags;
    short, so that it fits the policy's status message."""
    return ("roll it out as a new pool (`strategy: blue-green`: a second pair, traffic shifted by "
            "HTTPRoute weights) or set `spec.pdProbe.onIncompatible: all-at-once` (each role switched in "
            "one step; a full second copy must fit)")


def refusal(cli_target: str, namespace: str, res: CompatResult, hint: Hint = blue_green_hint) -> str:
    """The one-line message of a rollout refused because the revisions cannot hand KV off."""
    if not res.ran:
        return (f"{cli_target} -n {namespace}: the cross-revision P/D probe could not run, so nothing was "
                f"changed: {res.detail}")
    # the way forward before the engines' (long) errors, so a truncated line still says what to do
    return (f"{cli_target} -n {namespace}: refused, nothing changed: the new revision cannot hand KV off "
            f"across revisions ({'; '.join(res.failed)}). A staged rollout would mix revisions and fail "
            f"those requests; {hint(cli_target, namespace)}. The probe: {res.detail}")
