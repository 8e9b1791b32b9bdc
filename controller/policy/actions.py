"""What a person does to a RolloutPolicy: promote, pause, resume, abort, retry.

One implementation for every front end: ``kubectl lwsflow`` (``cli/kubectl_plugin.py``) and
``lwsflow dashboard``'s buttons (``dashboard/server.py``) both call these functions with a
``Kube`` built from the user's own kubeconfig, so the cluster's RBAC decides, and a 403 reaches the
caller as :class:`~lwsflow.controller.errors.Forbidden`. Each writes what the in-cluster controller
reads (annotations on the target or the policy) and returns the line the front end shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from lwsflow.controller.api.phases import PolicyAction
from lwsflow.controller.api.wire import Obj

if TYPE_CHECKING:
    from lwsflow.controller.kube.client import Kube
    from lwsflow.controller.rollout.session import Target

ACTIONS = tuple(PolicyAction)


def get_policy(kube: Kube, ns: str, name: str) -> Obj:
    """The policy, or InvalidInput naming it when it does not exist."""
    from lwsflow.controller.errors import InvalidInput, NotFound
    from lwsflow.controller.kube.resources import ROLLOUT_POLICY

    try:
        return kube.get(ROLLOUT_POLICY, ns, name)
    except NotFound:
        raise InvalidInput(f"rolloutpolicy {ns}/{name} not found", field="policy") from None


def target_of(policy: Obj) -> Target:
    """The rollout target a policy names."""
    from lwsflow.controller.policy import problems
    from lwsflow.controller.policy.model import RolloutPolicySpec
    from lwsflow.controller.rollout import session

    spec: RolloutPolicySpec = problems.stored_spec(policy)
    kind = {"LeaderWorkerSet": "lws", "DisaggregatedSet": "ds", "LeaderWorkerSetPair": "pair"}[
        spec.targetRef.kind]
    return session.Target(kind, spec.targetRef.name, policy["metadata"]["namespace"])


def _flags(kube: Kube, namespace: str, policy: str, **flags: bool) -> None:
    from lwsflow.controller.rollout import session

    p = get_policy(kube, namespace, policy)
    target = target_of(p)
    if (p.get("spec") or {}).get("strategy") == "blue-green":  # its state and flags are on the HTTPRoute
        from lwsflow.controller.bluegreen.executor import request

        request(kube, namespace, target.name, **flags)
        return
    session.set_flags(kube, session.clock_for(kube).now(), target, **flags)


def pause(kube: Kube, namespace: str, policy: str) -> str:
    """Pause the rollout at its next step (no further stage starts until resume)."""
    _flags(kube, namespace, policy, paused=True)
    return f"{namespace}/{policy}: pause requested"


def resume(kube: Kube, namespace: str, policy: str) -> str:
    """Resume a paused rollout (a fresh progress deadline from now)."""
    _flags(kube, namespace, policy, paused=False)
    return f"{namespace}/{policy}: resumed"


def abort(kube: Kube, namespace: str, policy: str) -> str:
    """Abort: the controller rolls the target back to the stable template (blue-green: every
    request back on blue, green deleted)."""
    _flags(kube, namespace, policy, abort=True)
    return f"{namespace}/{policy}: abort requested"


def promote(kube: Kube, namespace: str, policy: str) -> str:
    """Pass the manual gate the rollout waits at, or the stage it is paused at because its analysis
    decided nothing (InvalidInput when neither)."""
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.policy import gates, problems
    from lwsflow.controller.policy.model import RolloutPolicySpec
    from lwsflow.controller.rollout import session, state

    p = get_policy(kube, namespace, policy)
    spec: RolloutPolicySpec = problems.stored_spec(p)
    target = target_of(p)
    objs = session._objects(kube, target)  # a pair: decode (carries the marks), then prefill
    res, obj = objs[0]
    st = state.RolloutState.from_object(obj)
    k = gates.waiting_at(spec, st, obj, [o for _r, o in objs[1:]])
    held = gates.inconclusive_at(st)
    if k is None and held is not None:  # paused inconclusive: a person passes the stage
        kube.merge_patch(res, namespace, obj["metadata"]["name"],
                         gates.accept_patch(obj, st, session.clock_for(kube).now()))
        return (f"{namespace}/{policy}: stage {held + 1} passed despite an inconclusive analysis "
                f"(rollout {st.id}); the rollout continues")
    if k is None:
        raise InvalidInput(f"{namespace}/{policy}: the rollout is not waiting at a manual gate "
                           f"(phase {(p.get('status') or {}).get('phase', 'Idle')})", field="policy")
    meta = obj["metadata"]
    kube.merge_patch(res, namespace, meta["name"], {"metadata": {
        "resourceVersion": meta["resourceVersion"],
        "annotations": {gates.PROMOTED: gates.promote_value(st.id, k + 1)}}})
    return f"{namespace}/{policy}: stage {k + 1} promoted (rollout {st.id})"


def retry(kube: Kube, namespace: str, policy: str) -> str:
    """Roll out again the template whose last rollout failed, rolled back or was aborted."""
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.kube.resources import ROLLOUT_POLICY
    from lwsflow.controller.policy import gates
    from lwsflow.controller.rollout import session, state

    p = get_policy(kube, namespace, policy)
    target = target_of(p)
    objs = [o for _r, o in session._objects(kube, target)]
    st = state.RolloutState.from_object(objs[0])
    if (p.get("spec") or {}).get("strategy") == "blue-green":  # its state is on the HTTPRoute
        bg = session.blue_green_state(kube, target)
        st = state.RolloutState(id=bg.id, phase=state.RUNNING if bg.active else bg.phase) if bg else \
            state.RolloutState()
    if not st.id or st.active or st.phase == state.SUCCEEDED:
        raise InvalidInput(f"{namespace}/{policy}: nothing to retry (last rollout: "
                           f"{st.phase or 'none'})", field="policy")
    how = "" if (p.get("spec") or {}).get("strategy") == "blue-green" else \
        _retry_how(namespace, policy, target, objs, st.id)
    kube.merge_patch(ROLLOUT_POLICY, namespace, policy, {"metadata": {"annotations": {gates.RETRY: st.id}}})
    return f"{namespace}/{policy}: retry of rollout {st.id} requested{how}"


def _retry_how(namespace: str, policy: str, target: Target, objs: list[Obj], rollout_id: str) -> str:
    """How the controller will retry rollout ``rollout_id`` (appended to the answer), or
    OperationFailed saying why it cannot and what to do instead: a retry must never be a yes that
    starts nothing."""
    from lwsflow.controller.errors import OperationFailed
    from lwsflow.controller.policy import gates
    from lwsflow.controller.policy import status as pstatus
    from lwsflow.controller.rollout import state

    reapplied: list[str] = []
    for obj in objs:
        st = state.RolloutState.from_object(obj)
        if st.id != rollout_id:
            continue
        cur = state.template_hash(state.template_of(obj))
        failed = st.target_hash or st.manifest_hash
        if cur in (st.target_hash, st.manifest_hash):
            continue  # the failed template is back on the target (a Git sync): rolled out as it is
        name = obj["metadata"]["name"]
        if cur != pstatus.stable_hash(st):
            raise OperationFailed(
                f"{namespace}/{policy}: cannot retry rollout {rollout_id}: {name} now holds template {cur}, "
                f"neither the failed {failed} nor the stable one; the controller rolls that template out "
                f"on its own (see `kubectl lwsflow status {policy}`)")
        if target.kind == "ds" or gates.recorded_failure(st) is None:
            why, frozen = ("a DisaggregatedSet has no partition to hold it while its rollout starts", "") \
                if target.kind == "ds" else ("the rollback did not record it (an older controller)",
                                             ", partition at replicas")
            raise OperationFailed(
                f"{namespace}/{policy}: cannot retry rollout {rollout_id}: its template {failed} is no "
                f"longer on {name} (the rollback restored the stable one) and the controller cannot put "
                f"it back: {why}; apply that template again (a Git sync or kubectl apply{frozen}), then "
                f"run `kubectl lwsflow retry {policy}` again")
        reapplied.append(name)
    if reapplied:
        return f": the controller puts its template back on {', '.join(reapplied)} and rolls it out again"
    return ""


BY_NAME: dict[str, Callable[[Kube, str, str], str]] = {
    PolicyAction.PROMOTE: promote, PolicyAction.PAUSE: pause, PolicyAction.RESUME: resume,
    PolicyAction.ABORT: abort, PolicyAction.RETRY: retry}
