"""``kubectl lwsflow``: look at and steer RolloutPolicies (installed as the ``kubectl-lwsflow`` script).

    kubectl lwsflow get [-n NS | -A]
    kubectl lwsflow status POLICY [-n NS]     stages, the gate predicates, groups ready/updated per role
    kubectl lwsflow promote POLICY [-n NS]    pass the manual gate the rollout waits at
    kubectl lwsflow pause|resume|abort POLICY [-n NS]
    kubectl lwsflow retry POLICY [-n NS]      roll out again the template whose rollout failed
    kubectl lwsflow dashboard [-n NS | -A]    a live web view on 127.0.0.1 (as `lwsflow dashboard`)

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
                     "abort, retry, dashboard.", no_args_is_help=True, pretty_exceptions_enable=False,
                     add_completion=False)

Namespace = Annotated[str, typer.Option("--namespace", "-n")]
Kubeconfig = Annotated[str | None, typer.Option(help="default: $KUBECONFIG")]


def _kube(kubeconfig: str | None) -> Kube:
    from lwsflow.controller.kube.client import Kube

    return Kube.connect(kubeconfig)


def _policy(kube: Kube, ns: str, name: str) -> Obj:
    from lwsflow.controller.policy.actions import get_policy

    return get_policy(kube, ns, name)


def _target_of(policy: Obj) -> Target:
    from lwsflow.controller.policy.actions import target_of

    return target_of(policy)


@plugin.command()
def get(namespace: Namespace = "default",
        all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A")] = False,
        kubeconfig: Kubeconfig = None) -> None:
    """List RolloutPolicies with their phase, stage and revisions."""
    from lwsflow.controller.api.phases import PolicyPhase
    from lwsflow.controller.kube.resources import ROLLOUT_POLICY

    kube = _kube(kubeconfig)
    items, _ = kube.list(ROLLOUT_POLICY, None if all_namespaces else namespace)
    rows = [("NAMESPACE", "NAME", "TARGET", "PHASE", "STAGE", "STABLE", "CANARY")]
    for p in items:
        s, ref = p.get("status") or {}, (p.get("spec") or {}).get("targetRef") or {}
        rows.append((p["metadata"]["namespace"], p["metadata"]["name"],
                     f"{ref.get('kind', '?')}/{ref.get('name', '?')}", s.get("phase", PolicyPhase.IDLE.value),
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
    from lwsflow.controller.api.phases import PolicyPhase
    from lwsflow.controller.kube import watch as kwatch
    from lwsflow.controller.kube.resources import ROLLOUT_POLICY

    kube = _kube(kubeconfig)
    p = _policy(kube, namespace, policy)
    _print_status(kube, namespace, policy, p)
    if not watch:
        return
    shown = (p.get("status") or {}).get("stageText"), (p.get("status") or {}).get("phase")
    running = (None, PolicyPhase.IDLE, PolicyPhase.PROGRESSING)
    while shown[1] in running:
        for cur in kwatch.follow(kube, ROLLOUT_POLICY, namespace, policy, wall_budget=30.0):
            now = (cur.get("status") or {}).get("stageText"), (cur.get("status") or {}).get("phase")
            if now != shown:
                print()
                _print_status(kube, namespace, policy, cur)
                shown = now
            if shown[1] not in running:
                return


def _print_status(kube: Kube, namespace: str, policy: str, p: Obj) -> None:
    from lwsflow.controller.policy import gates, problems
    from lwsflow.controller.policy.model import RolloutPolicySpec
    from lwsflow.controller.rollout import gate, session, state
    from lwsflow.controller.rollout.ds import DsKind

    spec: RolloutPolicySpec = problems.stored_spec(p)
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


def _act(action: str, policy: str, namespace: str, kubeconfig: str | None) -> None:
    """Run one of ``policy_actions`` (the code the dashboard's buttons run too) and print its line."""
    from lwsflow.controller.policy import actions as policy_actions

    print(policy_actions.BY_NAME[action](_kube(kubeconfig), namespace, policy))


@plugin.command()
def pause(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None) -> None:
    """Pause the rollout at its next step (no further stage starts until resume)."""
    _act("pause", policy, namespace, kubeconfig)


@plugin.command()
def resume(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None) -> None:
    """Resume a paused rollout (a fresh progress deadline from now)."""
    _act("resume", policy, namespace, kubeconfig)


@plugin.command()
def abort(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None) -> None:
    """Abort the rollout: the controller rolls the target back to the stable template (blue-green:
    every request back on blue, green deleted)."""
    _act("abort", policy, namespace, kubeconfig)


@plugin.command()
def promote(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None) -> None:
    """Pass the manual gate the rollout waits at, or the stage its analysis paused inconclusive."""
    _act("promote", policy, namespace, kubeconfig)


@plugin.command()
def retry(policy: str, namespace: Namespace = "default", kubeconfig: Kubeconfig = None) -> None:
    """Roll out again the template whose last rollout failed, rolled back or was aborted (the
    controller puts it back on the target when the rollback took it off; exit 1 when it cannot)."""
    _act("retry", policy, namespace, kubeconfig)


@plugin.command()
def dashboard(namespace: Namespace = "default",
              all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A")] = False,
              kubeconfig: Kubeconfig = None,
              port: Annotated[int, typer.Option(help="0: any free port")] = 0) -> None:
    """A live web view of the RolloutPolicies on 127.0.0.1 (as `lwsflow dashboard`)."""
    from lwsflow.dashboard import run_until_interrupted

    run_until_interrupted(kubeconfig=kubeconfig, namespace=None if all_namespaces else namespace,
                          port=port)


def main(argv: list[str] | None = None) -> int:
    from lwsflow.cli import _fail
    from lwsflow.controller.errors import InvalidInput, LwsflowError

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
