"""Status predicates over LWS / DS dicts: the one place that decides "rolled out" and "stage done".

Used by the rollout gate, the Argo CD health checks and smoke targeting. Pure functions over plain
manifests (as read from the API server). Semantics: lws-semantics.md section c (conditions are only
ever written True, flipped False in place, never removed; every counter includes surge groups) and
section f (DS role statuses).
"""

from __future__ import annotations

from typing import Any

from lwsflow.controller.api.common import as_dict as _d
from lwsflow.controller.api.labels import (
    COND_AVAILABLE,
    COND_UPDATE_IN_PROGRESS,
    DS_REVISION,
    DS_ROLE,
    DS_SLICE,
)
from lwsflow.controller.api.quantity import quantity, quantity_text
from lwsflow.controller.api.wire import ConditionView, conditions


def _n(v: Any, default: int = 0) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def get_condition(obj: dict[str, Any], cond_type: str) -> ConditionView | None:
    """The ``status.conditions`` entry of ``cond_type``, or None."""
    return next((c for c in conditions(obj) if c.get("type") == cond_type), None)


def condition_true(obj: dict[str, Any], cond_type: str, *, current: bool = False) -> bool:
    """Whether the condition's status is "True" (its reason is never trusted: it goes stale on flip).

    ``current=True`` also requires its observedGeneration to equal ``metadata.generation``.
    """
    cond = get_condition(obj, cond_type)
    if cond is None or cond.get("status") != "True":
        return False
    return not current or cond.get("observedGeneration") == generation(obj)


def generation(obj: dict[str, Any]) -> int | None:
    g = _d(obj.get("metadata")).get("generation")
    return g if isinstance(g, int) else None


def observed_current(obj: dict[str, Any]) -> bool:
    """``status.observedGeneration == metadata.generation`` (both present)."""
    g = generation(obj)
    return g is not None and _d(obj.get("status")).get("observedGeneration") == g


def _generation_mismatch(obj: dict[str, Any]) -> str:
    return (f"observedGeneration {_d(obj.get('status')).get('observedGeneration')} != "
            f"generation {generation(obj)}")


def _spec_replicas(spec: dict[str, Any]) -> int:
    return _n(spec.get("replicas"), 1)  # CRD default


def _counts(obj: dict[str, Any]) -> tuple[int, int, int, int]:
    """(spec.replicas, status.replicas, readyReplicas, updatedReplicas)."""
    st = _d(obj.get("status"))
    return (_spec_replicas(_d(obj.get("spec"))), _n(st.get("replicas")), _n(st.get("readyReplicas")),
            _n(st.get("updatedReplicas")))


def spec_partition(obj: dict[str, Any]) -> int:
    ruc = _d(_d(_d(obj.get("spec")).get("rolloutStrategy")).get("rollingUpdateConfiguration"))
    return _n(ruc.get("partition"), 0)


def _conditions_checks(obj: dict[str, Any]) -> dict[str, bool]:
    return {"observedGeneration": observed_current(obj),
            "available": condition_true(obj, COND_AVAILABLE, current=True),
            "notUpdateInProgress": not condition_true(obj, COND_UPDATE_IN_PROGRESS)}


def lws_fully_rolled_checks(obj: dict[str, Any]) -> dict[str, bool]:
    """The named predicates of :func:`lws_fully_rolled` (all True <=> fully rolled)."""
    want, replicas, ready, updated = _counts(obj)
    return {**_conditions_checks(obj), "fullEquality": want == replicas == ready == updated}


def lws_fully_rolled(obj: dict[str, Any]) -> bool:
    """Every group on the current revision and ready, no surge left, all of it observed.

    observedGeneration == generation, spec.replicas == status.replicas == readyReplicas ==
    updatedReplicas, Available True for the current generation, UpdateInProgress not True.
    ``updatedReplicas == spec.replicas`` alone is not enough: with surge it is reached while
    low-ordinal groups are still old (R=4, S=2: groups 2-5 updated reads 4).
    """
    return all(lws_fully_rolled_checks(obj).values())


def lws_stage_checks(obj: dict[str, Any], partition: int | None = None) -> dict[str, bool]:
    """The named predicates of :func:`lws_stage_complete` (all True <=> the stage is done)."""
    p = spec_partition(obj) if partition is None else partition
    want, replicas, ready, updated = _counts(obj)
    checks = {"partition": spec_partition(obj) == p, **_conditions_checks(obj)}
    if p == 0:
        checks["fullEquality"] = want == replicas == ready == updated
    else:
        surge = replicas - want
        checks["allGroupsExist"] = surge >= 0
        checks["everyGroupReady"] = ready == replicas
        checks["updatedReachedTarget"] = updated >= max(0, want - p) + max(0, surge)
    return checks


def lws_stage_complete(obj: dict[str, Any], partition: int | None = None) -> bool:
    """Whether the rollout stage with user partition ``partition`` (default: the spec's) is done.

    lws-semantics.md section c, "Recommended completion predicate", made robust to surge groups:
    the spec must carry that partition and be observed; Available True for this generation;
    UpdateInProgress not True. For ``P == 0`` all four counts equal spec.replicas (no lingering
    surge). For ``P > 0`` surge groups (``status.replicas - R``) inflate every counter, so require
    updated >= (R - P) + surge and every created group ready (surge groups run the new template:
    one that cannot become ready is a failed stage, not a finished one).
    """
    return all(lws_stage_checks(obj, partition).values())


def explain_lws(obj: dict[str, Any], partition: int | None = None) -> str:
    """One line saying which counts / conditions keep the LWS (or its stage) from being done."""
    want, replicas, ready, updated = _counts(obj)
    p = spec_partition(obj) if partition is None else partition
    problems: list[str] = []
    if spec_partition(obj) != p:
        problems.append(f"spec partition {spec_partition(obj)} != stage partition {p}")
    if not observed_current(obj):
        problems.append(_generation_mismatch(obj))
    surge = max(0, replicas - want)
    want_updated = want if p == 0 else max(0, want - p) + surge
    if p == 0 and replicas != want:
        problems.append(f"status.replicas {replicas} != spec.replicas {want}"
                        + (f" ({replicas - want} surge groups left)" if replicas > want else ""))
    if ready != replicas or ready < want:
        problems.append(f"readyReplicas {ready} of {max(replicas, want)}")
    if updated < want_updated or (p == 0 and updated != want):
        problems.append(f"updatedReplicas {updated}, want {want_updated}")
    if not condition_true(obj, COND_AVAILABLE, current=True):
        cond = get_condition(obj, COND_AVAILABLE)
        state = "missing" if cond is None else (
            f"status {cond.get('status')}" if cond.get("status") != "True"
            else f"stale (observedGeneration {cond.get('observedGeneration')})")
        problems.append(f"Available {state}")
    if condition_true(obj, COND_UPDATE_IN_PROGRESS):
        problems.append("UpdateInProgress True")
    return "; ".join(problems) if problems else "done"


def _list(v: Any) -> list[dict[str, Any]]:
    """The named entries of a list-map (roles, roleStatuses); anything malformed is ignored."""
    if not isinstance(v, list):
        return []
    return [x for x in v if isinstance(x, dict) and isinstance(x.get("name"), str)]


def _role_statuses(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in _list(_d(obj.get("status")).get("roleStatuses"))}


def _role_counts(st: dict[str, Any]) -> tuple[int, int, int]:
    """(replicas, readyReplicas, updatedReplicas) of one roleStatus."""
    return _n(st.get("replicas")), _n(st.get("readyReplicas")), _n(st.get("updatedReplicas"))


def _ds_desired(obj: dict[str, Any], external_replicas: dict[str, int] | None) -> dict[str, int | None]:
    """Per spec role, the groups it should have: spec.replicas (default 1), or for an External role
    its scaler's replicas from ``external_replicas`` (None when not given), times ``slices``."""
    slices = _n(_d(obj.get("spec")).get("slices"), 1)
    return {name: None if d is None else d * slices
            for name, d in _ds_desired_per_slice(obj, external_replicas).items()}


def _ds_desired_per_slice(obj: dict[str, Any],
                          external_replicas: dict[str, int] | None) -> dict[str, int | None]:
    """Per spec role, the groups one slice should have (see :func:`_ds_desired`)."""
    out: dict[str, int | None] = {}
    for role in _list(_d(obj.get("spec")).get("roles")):
        name = role["name"]
        if _d(role.get("scaling")).get("mode") == "External":
            out[name] = (external_replicas or {}).get(name)
        else:
            out[name] = _spec_replicas(_d(role.get("spec")))
    return out


def ds_roles_ready(obj: dict[str, Any], external_replicas: dict[str, int] | None = None) -> dict[str, bool]:
    """Per spec role: desired*slices == replicas == readyReplicas == updatedReplicas in roleStatuses.

    ``desired`` is the role's spec.replicas (default 1); for External roles it is the role scaler's
    spec.replicas, passed in ``external_replicas`` (without it an External role is never ready,
    as upstream treats one without a scaler).
    """
    by_name = _role_statuses(obj)
    out: dict[str, bool] = {}
    for name, want in _ds_desired(obj, external_replicas).items():
        st = by_name.get(name)
        out[name] = want is not None and st is not None and _role_counts(st) == (want, want, want)
    return out


def ds_fully_rolled_checks(obj: dict[str, Any],
                           external_replicas: dict[str, int] | None = None) -> dict[str, bool]:
    """The named predicates of :func:`ds_fully_rolled`: one ``role:<name>`` entry per spec role."""
    roles = ds_roles_ready(obj, external_replicas)
    return {"observedGeneration": observed_current(obj), "rolesPresent": bool(roles),
            **{f"role:{name}": ok for name, ok in roles.items()},
            "available": condition_true(obj, COND_AVAILABLE, current=True)}


def ds_fully_rolled(obj: dict[str, Any], external_replicas: dict[str, int] | None = None) -> bool:
    """Observed, every role ready (``ds_roles_ready``) and Available True for this generation."""
    return all(ds_fully_rolled_checks(obj, external_replicas).values())


def explain_ds(obj: dict[str, Any], external_replicas: dict[str, int] | None = None) -> str:
    """One line naming the roles whose counts differ, or "done"."""
    problems: list[str] = []
    if not observed_current(obj):
        problems.append(_generation_mismatch(obj))
    by_name = _role_statuses(obj)
    desired = _ds_desired(obj, external_replicas)
    for name, ok in ds_roles_ready(obj, external_replicas).items():
        if ok:
            continue
        st = by_name.get(name)
        d = desired.get(name)
        want = "unknown (External role without scaler replicas)" if d is None else str(d)
        problems.append(f"role {name}: " + ("no roleStatus" if st is None else
                        f"replicas/ready/updated {'/'.join(map(str, _role_counts(st)))} (want {want})"))
    if not condition_true(obj, COND_AVAILABLE, current=True):
        problems.append("Available not True for this generation")
    return "; ".join(problems) if problems else "done"


# -- a DS whose controller writes no status (upstream v0.9.0 / v0.10.0): read its child LWS ----------


def ds_status_written(obj: dict[str, Any]) -> bool:
    """Whether the DS carries a controller-written status (``status.observedGeneration``).

    Upstream writes the DS status only on main after v0.10.0 (lws-semantics §f "Status"); released
    controllers write none, so the verdict must come from the child LWS (:func:`ds_children_checks`).
    """
    return isinstance(_d(obj.get("status")).get("observedGeneration"), int)


def _label(obj: dict[str, Any], key: str, default: str = "") -> str:
    v = _d(_d(obj.get("metadata")).get("labels")).get(key)
    return v if isinstance(v, str) else default


def _zero(v: Any) -> bool:
    return v is None or v == {} or v == [] or v == "" or v is False or (isinstance(v, int) and v == 0)


def _quantities(v: Any) -> Any:
    """A ``limits`` / ``requests`` map with each quantity canonical: the DS controller's Go structs
    write a role's ``nvidia.com/gpu: 8`` back as ``"8"``."""
    out = {}
    for k, x in _d(v).items():
        try:
            out[k] = quantity_text(quantity(x))
        except ValueError:
            out[k] = x
    return out


def _canonical(v: Any, key: str = "") -> Any:
    """``v`` with zero values left out at every level (the DS controller copies a role's template
    through Go structs, which write empty ones the DS never held: ``resources: {}`` on a container)
    and resource quantities canonical (:func:`_quantities`)."""
    if isinstance(v, dict):
        out = {k: (_quantities(x) if k in ("limits", "requests") and key == "resources" else _canonical(x, k))
               for k, x in v.items()}
        return {k: x for k, x in out.items() if not _zero(x)}
    if isinstance(v, list):
        return [_canonical(x) for x in v]
    return v


def _template_key(lwt: Any) -> tuple[Any, list[dict[str, Any]]]:
    """A role's ``leaderWorkerTemplate`` as its child LWS carries it, and each pod template's
    annotations apart. The DS controller adds its own labels to the pod templates (lws-semantics §f
    "Child LWS"), so pod template labels are left out; admission webhooks add annotations to the
    child (Kueue's LWS webhook: ``kueue.x-k8s.io/pod-group-serving``, ``pod-suspending-parent``), so a
    role's annotations need only be among the child's (:func:`_same_template`). Zero values are left
    out and quantities compared by value (:func:`_canonical`)."""
    out = dict(_d(lwt))
    annotations = []
    for key in ("leaderTemplate", "workerTemplate"):
        if key in out:
            tmpl = dict(_d(out[key]))
            meta = _d(tmpl.get("metadata"))
            annotations.append(dict(_d(meta.get("annotations"))))
            tmpl["metadata"] = {k: v for k, v in meta.items() if k not in ("labels", "annotations")}
            out[key] = tmpl
    return _canonical(out), annotations


def _same_template(role: tuple[Any, list[dict[str, Any]]], child: tuple[Any, list[dict[str, Any]]]) -> bool:
    """The child LWS carries the role's template: equal but for labels, and with every annotation of
    the role's pod templates (a webhook may have added more)."""
    (rt, rann), (ct, cann) = role, child
    return rt == ct and len(rann) == len(cann) and all(
        all(c.get(k) == v for k, v in r.items()) for r, c in zip(rann, cann, strict=True))


def _ds_current_revision(obj: dict[str, Any], children: list[dict[str, Any]]) -> str | None:
    """The ``/revision`` label of the children created from the DS's current roles, or None.

    The revision hash is computed by the controller over its defaulted spec and cannot be
    recomputed here; a child is on the current revision when its template is the role's template
    (so the old revision is never mistaken for the new one before the controller created it). Of
    several matching revisions (a template change reverted), the newest child's wins.
    """
    want = {r["name"]: _template_key(_d(r.get("spec")).get("leaderWorkerTemplate"))
            for r in _list(_d(obj.get("spec")).get("roles"))}
    match = [c for c in children if _label(c, DS_ROLE) in want and _label(c, DS_REVISION)
             and _same_template(want[_label(c, DS_ROLE)],
                                _template_key(_d(c.get("spec")).get("leaderWorkerTemplate")))]
    if not match:
        return None
    newest = max(match, key=lambda c: (str(_d(c.get("metadata")).get("creationTimestamp") or ""),
                                       str(_d(c.get("metadata")).get("name") or "")))
    return _label(newest, DS_REVISION)


def _child_name(c: dict[str, Any]) -> str:
    return f"lws/{_d(c.get('metadata')).get('name')}"


def _ds_children_eval(obj: dict[str, Any], children: list[dict[str, Any]],
                      external_replicas: dict[str, int] | None) -> tuple[dict[str, bool], list[str]]:
    """The checks of :func:`ds_children_checks` and one problem line per failing child/predicate."""
    rev = _ds_current_revision(obj, children)
    slices = _n(_d(obj.get("spec")).get("slices"), 1)
    desired = _ds_desired_per_slice(obj, external_replicas)
    problems: list[str] = [] if rev is not None else ["no child LWS on the DS's current template yet"]
    current = [c for c in children if rev is not None and _label(c, DS_REVISION) == rev]
    checks: dict[str, bool] = {"currentRevision": rev is not None, "rolesPresent": bool(desired)}
    for name, want in desired.items():
        ok = want is not None
        if want is None:
            problems.append(f"role {name}: desired replicas unknown (External role without scaler replicas)")
        for s in range(slices):
            mine = [c for c in current if _label(c, DS_ROLE) == name and _label(c, DS_SLICE, "0") == str(s)]
            if not mine:
                ok = False
                if rev is not None:
                    problems.append(f"role {name} slice {s}: no child LWS on revision {rev}")
            for c in mine:
                spec_r = _spec_replicas(_d(c.get("spec")))
                failing = [k for k, v in lws_fully_rolled_checks(c).items() if not v]
                if want is not None and spec_r != want:
                    failing.insert(0, "targetReplicas")
                    problems.append(f"{_child_name(c)}: spec.replicas {spec_r}, want {want}")
                if failing:
                    ok = False
                    problems.append(f"{_child_name(c)} ({name}) failing {','.join(failing)}: "
                                    f"{explain_lws(c)}")
        checks[f"role:{name}"] = ok
    left = [c for c in children if c not in current and (
        _spec_replicas(_d(c.get("spec"))) > 0 or _n(_d(c.get("status")).get("replicas")) > 0)]
    for c in left:
        problems.append(f"{_child_name(c)} (revision {_label(c, DS_REVISION) or '?'}) still has "
                        f"{_spec_replicas(_d(c.get('spec')))} groups in spec, "
                        f"{_n(_d(c.get('status')).get('replicas'))} in status")
    checks["oldRevisionsDrained"] = not left
    return checks, problems


def ds_children_checks(obj: dict[str, Any], children: list[dict[str, Any]],
                       external_replicas: dict[str, int] | None = None) -> dict[str, bool]:
    """The DS verdict from its child LWS, for a DS whose controller writes no status (§f "Status").

    ``children``: the LWS the DS owns. Per spec role and slice, the child on the DS's current
    revision (:func:`_ds_current_revision`) must hold :func:`lws_fully_rolled` (its full equality,
    Available for its generation) with ``spec.replicas`` at the role's target; and no child of another
    revision may keep a group (``spec.replicas`` or ``status.replicas`` above 0). The same numbers
    upstream's v0.10+ status sums (``Available`` iff every role's equality holds).
    """
    return _ds_children_eval(obj, children, external_replicas)[0]


def explain_ds_children(obj: dict[str, Any], children: list[dict[str, Any]],
                        external_replicas: dict[str, int] | None = None) -> str:
    """One line naming each child LWS and predicate that keeps the DS from being rolled, or "done"."""
    problems = _ds_children_eval(obj, children, external_replicas)[1]
    return "; ".join(problems) if problems else "done"
