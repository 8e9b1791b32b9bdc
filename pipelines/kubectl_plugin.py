"""``kubectl lwsflow``: look at and steer RolloutPolicies (installed as the ``kubectl-lwsflow`` script).

    kubectl lwsflow get [-n NS | -A]
    kubectl lwsflow status POLICY [-n NS]     stages, the gate predicates, groups ready/updated per role
    kubectl lwsflow promote POLICY [-n NS]    pass the manual gate the rollout waits at
    kubectl lwsflow pause|resume|abort POLICY [-n NS]
    kubectl lwsflow retry POLICY [-n NS]      roll out again the template whose rollout failed

Every command writes what the in-cluster controller reads (annotations on the target or the policy);
the controller does the rest. Exit 2 on bad input (one line naming the field), 1 when the API fails.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from lwsflow.controller.api.wire import Obj

if TYPE_CHECKING:
    from lwsflow.controller.kube.client import Kube
    from lwsflow.controller.rollout.session import Target

plugin = typer.Typer(name="kubectl-lwsflow", help="RolloutPolicies: get, status, promote, pause, resume, "
                     "abort, retry.", no_args_is_help=True, pretty_exceptions_enable=False,
                     add_completion=False)

Namespace = Annotated[str, typer.Option("--namespace", "-n")]
Kubeconfig = Annotated[str | None, typer.Option(help="default: $KUBECONFIG")]


def _kube(kubeconfig: str | None) -> Kube:
    from lwsflow.controller.kube.client import Kube

    return Kube.connect(kubeconfig)


def _policy(kube: Kube, ns: str, name: str) -> Obj:
    from lwsflow.controller.errors import InvalidInput, NotFound
    from lwsflow.controller.kube.resources import ROLLOUT_POLICY

    try:
        return kube.get(ROLLOUT_POLICY, ns, name)
    except NotFound:
        raise InvalidInput(f"rolloutpolicy {ns}/{name} not found", field="policy") from None


def _target_of(policy: Obj) -> Target:
    """The rollout target a policy names."""
    from lwsflow.controller.policy.model import RolloutPolicySpec
    from lwsflow.controller.rollout import session

    spec = RolloutPolicySpec.model_validate(policy.get("spec") or {})
    kind = {"LeaderWorkerSet": "lws", "DisaggregatedSet": "ds", "LeaderWorkerSetPair": "pair"}[
        spec.targetRef.kind]
    return session.Target(kind, spec.targetRef.name, policy["metadata"]["namespace"])


@plugin.command()
def get(namespace: Namespace = "default",
        all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A")] = False,
        kubeconfig: Kubeconfig = None) -> None:
    """List RolloutPolicies with their phase, stage and revisions."""
    from lwsflow.controller.kube.resources import ROLLOUT_POLICY

    kube = _kube(kubeconfig)
    items, _ = kube.list(ROLLOUT_POLICY, None if all_namespaces else namespace)
    rows = [("NAMESPACE", "NAME", "TARGET", "PHASE", "STAGE", "STABLE", "CANARY")]
    for p in items:
        s, ref = p.get("status") or {}, (p.get("spec") or {}).get("targetRef") or {}
        rows.append((p["metadata"]["namespace"], p["metadata"]["name"],
                     f"{ref.get('kind', '?')}/{ref.get('name', '?')}", s.get("phase", "Idle"),
                     s.get("stageText", "") or "-", s.get("stableRevision", "") or "-",
                     s.get("canaryRevision", "") or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


@plugin.command()
def status(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None,
           watch: Annotated[bool, typer.Option("--watch", "-w", help="reprint on every change until the "
                                               "rollout ends or waits for a human")] = False) -> None:
    """A live view: stages, the gate predicates, groups ready and updated per role."""
    from lwsflow.controller.kube import watch as kwatch
    from lwsflow.controller.kube.resources import ROLLOUT_POLICY

    kube = _kube(kubeconfig)
    p = _policy(kube, namespace, policy)
    _print_status(kube, namespace, policy, p)
    if not watch:
        return
    shown = (p.get("status") or {}).get("stageText"), (p.get("status") or {}).get("phase")
    while shown[1] in (None, "Idle", "Progressing"):
        for cur in kwatch.follow(kube, ROLLOUT_POLICY, namespace, policy, wall_budget=30.0):
            now = (cur.get("status") or {}).get("stageText"), (cur.get("status") or {}).get("phase")
            if now != shown:
                print()
                _print_status(kube, namespace, policy, cur)
                shown = now
            if shown[1] not in (None, "Idle", "Progressing"):
                return


def _print_status(kube: Kube, namespace: str, policy: str, p: Obj) -> None:
    from lwsflow.controller.policy import gates
    from lwsflow.controller.policy.model import RolloutPolicySpec
    from lwsflow.controller.rollout import gate, session, state
    from lwsflow.controller.rollout.ds import DsKind

    spec = RolloutPolicySpec.model_validate(p.get("spec") or {})
    s = p.get("status") or {}
    target = _target_of(p)
    print(f"{namespace}/{policy} -> {spec.targetRef.kind}/{spec.targetRef.name}: {s.get('phase', 'Idle')}"
          + (f" ({s['message']})" if s.get("message") else ""))
    print(f"  stable {s.get('stableRevision') or '-'}  canary {s.get('canaryRevision') or '-'}  "
          f"rollout {s.get('rolloutId') or '-'}")
    objs = [o for _r, o in session._objects(kube, target)]
    rs = state.RolloutState.from_object(objs[0])
    for k, stage in enumerate(spec.stages):
        notes = [f"bake {stage.bake}"] + (["manual gate"] if stage.pause is not None else []) + (
            [f"{len(stage.checks)} check(s)"] if stage.checks else [])
        mark = ""
        if rs.id and (rs.active or rs.phase == state.SUCCEEDED):
            mark = "passed" if k < rs.passed else ("in progress" if k == rs.passed and rs.active else "")
        print(f"  stage {k + 1}: groups {stage.groups!s:<5} {', '.join(notes):<36} {mark}".rstrip())
    for obj in objs:
        st = state.RolloutState.from_object(obj)
        name = obj["metadata"]["name"]
        if "roles" in (obj.get("spec") or {}):
            children = DsKind(kube, namespace).children(obj)  # None where the DS writes its status
            for role, ready in gate.ds_role_ready_groups(obj, children).items():
                print(f"  {name} role {role}: {ready} groups ready")
            res = gate.ds_gate(obj, children)
        else:
            c = gate.counters(obj)
            print(f"  {name}: partition {gate.partition(obj)}, replicas {c['replicas']}, ready "
                  f"{c['readyReplicas']}, updated {c['updatedReplicas']}")
            want = st.targets[st.passed] if st.active and st.passed < len(st.targets) else gate.replicas(obj)
            if gates.waiting_at(spec, st, obj) is not None and st.passed:
                want = st.targets[st.passed - 1]  # the next stage has not started: the last one's gate
            res = gate.lws_stage_gate(obj, want)
        checks = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in res.checks.items())
        print(f"  gate on {name}: {'holds' if res.passed else 'waiting'} ({checks})")


def _flags(policy: str, namespace: str, kubeconfig: str | None, **flags: bool) -> None:
    from lwsflow.controller.rollout import session

    kube = _kube(kubeconfig)
    p = _policy(kube, namespace, policy)
    target = _target_of(p)
    if (p.get("spec") or {}).get("strategy") == "blue-green":  # its state and flags are on the HTTPRoute
        from lwsflow.controller.rollout.bluegreen import request

        request(kube, namespace, target.name, **flags)
        return
    session.set_flags(kube, session.clock_for(kube).now(), target, **flags)


@plugin.command()
def pause(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None) -> None:
    """Pause the rollout at its next step (no further stage starts until resume)."""
    _flags(policy, namespace, kubeconfig, paused=True)
    print(f"{namespace}/{policy}: pause requested")


@plugin.command()
def resume(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None) -> None:
    """Resume a paused rollout (a fresh progress deadline from now)."""
    _flags(policy, namespace, kubeconfig, paused=False)
    print(f"{namespace}/{policy}: resumed")


@plugin.command()
def abort(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None) -> None:
    """Abort the rollout: the controller rolls the target back to the stable template (blue-green:
    every request back on blue, green deleted)."""
    _flags(policy, namespace, kubeconfig, abort=True)
    print(f"{namespace}/{policy}: abort requested")


@plugin.command()
def promote(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None) -> None:
    """Pass the manual gate the rollout waits at."""
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.policy import gates
    from lwsflow.controller.policy.model import RolloutPolicySpec
    from lwsflow.controller.rollout import session, state

    kube = _kube(kubeconfig)
    p = _policy(kube, namespace, policy)
    spec = RolloutPolicySpec.model_validate(p.get("spec") or {})
    target = _target_of(p)
    objs = session._objects(kube, target)  # a pair: decode (carries the marks), then prefill
    res, obj = objs[0]
    st = state.RolloutState.from_object(obj)
    k = gates.waiting_at(spec, st, obj, [o for _r, o in objs[1:]])
    if k is None:
        raise InvalidInput(f"{namespace}/{policy}: the rollout is not waiting at a manual gate "
                           f"(phase {(p.get('status') or {}).get('phase', 'Idle')})", field="policy")
    meta = obj["metadata"]
    kube.merge_patch(res, namespace, meta["name"], {"metadata": {
        "resourceVersion": meta["resourceVersion"],
        "annotations": {gates.PROMOTED: gates.promote_value(st.id, k + 1)}}})
    print(f"{namespace}/{policy}: stage {k + 1} promoted (rollout {st.id})")


@plugin.command()
def retry(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None) -> None:
    """Roll out again the template whose last rollout failed, rolled back or was aborted."""
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.kube.resources import ROLLOUT_POLICY
    from lwsflow.controller.policy import gates
    from lwsflow.controller.rollout import session, state

    kube = _kube(kubeconfig)
    p = _policy(kube, namespace, policy)
    target = _target_of(p)
    _res, obj = session._objects(kube, target)[0]
    st = state.RolloutState.from_object(obj)
    if (p.get("spec") or {}).get("strategy") == "blue-green":  # its state is on the HTTPRoute
        bg = session.blue_green_state(kube, target)
        st = state.RolloutState(id=bg.id, phase=state.RUNNING if bg.active else bg.phase) if bg else \
            state.RolloutState()
    if not st.id or st.active or st.phase == state.SUCCEEDED:
        raise InvalidInput(f"{namespace}/{policy}: nothing to retry (last rollout: "
                           f"{st.phase or 'none'})", field="policy")
    kube.merge_patch(ROLLOUT_POLICY, namespace, policy, {"metadata": {"annotations": {gates.RETRY: st.id}}})
    print(f"{namespace}/{policy}: retry of rollout {st.id} requested")


def main(argv: list[str] | None = None) -> int:
    from lwsflow.controller.errors import InvalidInput, LwsflowError
    from lwsflow.pipelines.cli import _fail

    try:
        plugin(args=argv, standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    except InvalidInput as exc:
        return _fail(exc, 2)
    except LwsflowError as exc:
        return _fail(exc, 1)
    except Exception as exc:
        from typer._click import exceptions as click_exc

        if isinstance(exc, click_exc.NoArgsIsHelpError):
            exc.show()
            return 0
        if isinstance(exc, click_exc.ClickException):
            print(f"error: {exc.format_message()}", file=sys.stderr)
            return 2
        raise
    return 0


def entry() -> None:
    sys.exit(main())
