"""The shipped RBAC is exactly what the controller uses: derived from the embedded API server's
request log over a rollout with `--smoke` (on serving pods behind a Service), a rollback (with a
forced group recreate), a P/D pair and a DS, and blue-green of a pair and of a DS."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.rollout import session
from lwsflow.controller.rollout.engine import RolloutOptions
from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents
from lwsflow.sim.apiserver import ApiServer
from reliability.ports import ReservedPort
from reliability.rollout_env import NS, SPEED, TOKEN, Env, ds_manifest, lws_manifest, new_release
from tests.rollout.rbac_kit import served, service_for, serving

# the stand-in engines' port: from the kernel, held while this test process runs (reliability/ports.py)
_ENGINE_PORT = ReservedPort()
__all__ = ["served"]  # the fixture (pods with stand-in engines, for --smoke), from rbac_kit

RBAC = repo_root() / "overlays" / "rbac"
BLUE_GREEN = RBAC / "bluegreen"  # the opt-in role of --strategy blue-green


def shipped(folder: Path = RBAC) -> set[tuple[str, str, str]]:
    out = set()
    for doc in load_yaml_documents(folder / "clusterrole.yaml"):
        for rule in doc["rules"]:
            assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
            assert "secrets" not in rule["resources"]
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        out.add((g, r, v))
    return out


def test_rbac_matches_what_the_controller_uses(served: Env, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from lwsflow.cli import main

    env = served
    # the MaxUnavailableStatefulSet gate on (off by default in Kubernetes 1.35/1.36): only then does a
    # StatefulSet leave a pod of the bad revision stuck, so the controller's forced recreate (pods
    # delete) is used
    env.cluster.config.max_unavailable_statefulset = True
    # 10 minutes of cluster time (3 s wall at 200x) per stage: the bad release, and then its rollback (a
    # forced group recreate), each get that long, so a loaded machine does not run the rollback out of time
    opts = RolloutOptions(stages="1,100%", deadline_s=600)
    port = _ENGINE_PORT.port
    good = serving("ok", port, replicas=2)
    env.create_ready(good)
    service_for(env, "ok", port)
    bad = lws_manifest("bad", replicas=2)
    env.create_ready(bad)
    p = lws_manifest("c-prefill", replicas=2, labels={L.PD_PAIR: "c", L.ROLE: "prefill"})
    d = lws_manifest("c-decode", replicas=1, labels={L.PD_PAIR: "c", L.ROLE: "decode"})
    env.create_ready(p)
    env.create_ready(d)
    ds = ds_manifest("dis")
    env.create_ready(ds)
    # the controller gets its own API server on the same store: its log holds only the controller
    api = ApiServer(env.cluster.store, token=TOKEN, clock=env.cluster.now, speed=SPEED)
    api.start()
    kcfg = api.write_kubeconfig(tmp_path / "controller.kubeconfig")
    kube = Kube.connect(str(kcfg))
    clock = session.clock_for(kube)
    # `lwsflow rollout --smoke` as a user runs it: the smoke's reads (the LWS, its pods, the leader
    # StatefulSet's revision, the Services, the nodes) are derived too, not just granted
    f = tmp_path / "ok.yaml"
    f.write_text(dump_yaml(new_release(good)))
    report = tmp_path / "ok.json"
    assert main(["rollout", "lws/ok", "-n", NS, "--kubeconfig", str(kcfg), "--manifest", str(f),
                 "--stages", "1,100%", "--smoke", "--report", str(report)]) == 0, capsys.readouterr()
    assert '"smoke passed"' in report.read_text()  # every stage smoked, and passed
    f = tmp_path / "bad.yaml"
    f.write_text(dump_yaml(new_release(bad, **{"sim.lwsflow.io/never-ready": "true"})))
    out = session.run(kube, clock, session.parse_target("lws/bad", NS), opts, manifest=f)
    assert out.result == "rolled-back", out.message
    f = tmp_path / "pair.yaml"
    f.write_text(dump_yaml(new_release(p)) + "---\n" + dump_yaml(new_release(d)))
    assert session.run(kube, clock, session.parse_target("pair/c", NS), opts,
                       manifest=f).result == "succeeded"
    f = tmp_path / "ds.yaml"
    # a load far longer than any stall between the controller's patch and its first read (400 virtual
    # s = 2 wall s): the gate cannot already pass then, so the DS is always watched, however loaded
    f.write_text(dump_yaml(new_release(ds, **{"sim.lwsflow.io/load-seconds": "400"})))
    assert session.run(kube, clock, session.parse_target("ds/dis", NS),
                       RolloutOptions(stages="1,100%", deadline_s=3600), manifest=f).result == "succeeded"
    partition_used = {(g, r, v) for g, r, v in api.verbs_used() if not r.startswith("/")}
    _blue_green(env, kube, clock, tmp_path)
    api.stop()
    used = {(g, r, v) for g, r, v in api.verbs_used() if not r.startswith("/")}
    # partition rollouts need the base role and nothing of the blue-green one, except one optional read:
    # a pair's rollout lists HTTPRoutes to refuse while a blue-green of it runs, and takes a 403 (no
    # blue-green role, so none can run) or a 404 (no Gateway API) as "none" (session.blue_green_state).
    # With blue-green, the two roles together are exactly what is used, and grant nothing twice.
    optional = {("gateway.networking.k8s.io", "httproutes", "list")}
    assert optional <= shipped(BLUE_GREEN)
    # Kueue's quota reads (a target with its queue label) are derived by test_quota_kueue.py, whose
    # cluster serves Kueue's CRDs
    kueue = {t for t in shipped() if t[0] == "kueue.x-k8s.io"}
    assert partition_used - optional == shipped() - kueue, (
        f"used but not granted: {partition_used - optional - shipped()}; granted, unused: "
        f"{shipped() - kueue - partition_used}")
    both = shipped() - kueue | shipped(BLUE_GREEN)
    assert not shipped() & shipped(BLUE_GREEN)
    assert used == both, f"used but not granted: {used - both}; granted, unused: {both - used}"


def _bg_pair(image: str) -> list[dict]:
    out = []
    for role, replicas in (("decode", 1), ("prefill", 1)):
        labels = {L.PD_PAIR: "bg", L.ROLE: role, L.MODEL: "bg"}
        doc = lws_manifest(f"bg-{role}", replicas=replicas, size=1, image=image, labels=labels)
        doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"] = dict(labels)
        out.append(doc)
    return out


def _blue_green(env: Env, kube: Kube, clock: object, tmp_path: Path) -> None:
    """A blue-green rolled back by a failing check, then one that succeeds (creates, weights, deletes),
    of a P/D pair and of a DisaggregatedSet."""
    from lwsflow.controller.kube.resources import HTTP_ROUTE, INFERENCE_POOL

    for doc in _bg_pair("vllm:1"):
        env.create_ready(doc)
    ref = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "bg", "weight": 100}
    env.kube.create(INFERENCE_POOL, NS, {"metadata": {"name": "bg", "namespace": NS}, "spec": {
        "selector": {"matchLabels": {L.MODEL: "bg"}}, "targetPorts": [{"number": 8000}],
        "endpointPickerRef": {"name": "epp", "port": {"number": 9002}}}})
    env.kube.create(HTTP_ROUTE, NS, {"metadata": {"name": "bg", "namespace": NS},
                                     "spec": {"rules": [{"backendRefs": [ref]}]}})
    target = session.parse_target("pair/bg", NS)
    for image, hooks, want in (("vllm:2", [lambda _ctx: False], "rolled-back"), ("vllm:3", [], "succeeded")):
        f = tmp_path / f"bg-{image[-1]}.yaml"
        f.write_text("---\n".join(dump_yaml(d) for d in _bg_pair(image)))
        opts = RolloutOptions(deadline_s=600, hooks=list(hooks))
        out = session.run(kube, clock, target, opts, manifest=f, strategy="blue-green",  # type: ignore[arg-type]
                          weights=[50, 100])
        assert out.result == want, out.message
    # a DisaggregatedSet the same way: the green DS created and deleted, then the blue one deleted
    ds = ds_manifest("bgd", prefill=1, decode=1)
    for role in ds["spec"]["roles"]:
        role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"] = {L.MODEL: "bgd"}
    env.create_ready(ds)
    env.kube.create(INFERENCE_POOL, NS, {"metadata": {"name": "bgd", "namespace": NS}, "spec": {
        "selector": {"matchLabels": {L.MODEL: "bgd"}}, "targetPorts": [{"number": 8000}],
        "endpointPickerRef": {"name": "epp", "port": {"number": 9002}}}})
    env.kube.create(HTTP_ROUTE, NS, {"metadata": {"name": "bgd", "namespace": NS},
                                     "spec": {"rules": [{"backendRefs": [{**ref, "name": "bgd"}]}]}})
    target = session.parse_target("ds/bgd", NS)
    for image, hooks, want in (("vllm:2", [lambda _ctx: False], "rolled-back"), ("vllm:3", [], "succeeded")):
        f = tmp_path / f"bgd-{image[-1]}.yaml"
        f.write_text(dump_yaml(new_release(ds, image)))
        opts = RolloutOptions(deadline_s=600, hooks=list(hooks))
        out = session.run(kube, clock, target, opts, manifest=f, strategy="blue-green",  # type: ignore[arg-type]
                          weights=[50, 100])
        assert out.result == want, out.message


def test_kustomization_lists_every_file() -> None:
    for folder in (RBAC, BLUE_GREEN):
        doc = load_yaml_documents(folder / "kustomization.yaml")[0]
        assert sorted(doc["resources"]) == sorted(p.name for p in folder.glob("*.yaml")
                                                  if p.name != "kustomization.yaml")


# -- the shipped RBAC, enforced: the controller runs with its own ServiceAccount token only -------------
def _install_rbac(env: Env, tmp_path: Path, *, drop_verb: tuple[str, str] | None = None) -> Path:
    """kubectl apply -k overlays/rbac (optionally with one verb taken out of one rule), then a
    kubeconfig for the controller's ServiceAccount from `lwsflow sim token`."""
    import shutil
    import subprocess
    import sys

    from lwsflow.cli import main
    from lwsflow.controller.errors import Conflict

    with contextlib.suppress(Conflict):  # namespaces are explicit on a real cluster
        env.kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "lwsflow-system"}})
    overlay = tmp_path / "rbac"
    shutil.copytree(RBAC, overlay)
    if drop_verb is not None:
        resource, verb = drop_verb
        role = load_yaml_documents(overlay / "clusterrole.yaml")[0]
        for rule in role["rules"]:
            if resource in rule["resources"]:
                rule["verbs"].remove(verb)
        role["rules"] = [r for r in role["rules"] if r["verbs"]]  # RBAC refuses a rule with no verb
        (overlay / "clusterrole.yaml").write_text(dump_yaml(role))
    kubectl = Path(sys.executable).parent / "kubectl"
    proc = subprocess.run([str(kubectl), "--kubeconfig", str(env.kubeconfig), "apply", "-k", str(overlay)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    sa = tmp_path / "controller.kubeconfig"
    assert main(["sim", "token", "lwsflow-rollout", "-n", "lwsflow-system",
                 "--kubeconfig", str(env.kubeconfig), "--kubeconfig-out", str(sa)]) == 0
    return sa


def test_staged_rollout_with_only_the_controller_service_account(env: Env, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """overlays/rbac is sufficient: a staged rollout completes with the ServiceAccount's token, every
    request authorised by the shipped ClusterRole through RBAC (no admin token anywhere)."""
    from lwsflow.cli import main

    base = lws_manifest("m", replicas=2)
    env.create_ready(base)
    sa = _install_rbac(env, tmp_path)
    mf = tmp_path / "m.yaml"
    mf.write_text(dump_yaml(new_release(base)))
    code = main(["rollout", "lws/m", "-n", NS, "--kubeconfig", str(sa), "--manifest", str(mf),
                 "--stages", "1,100%"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "succeeded" in out.out


def test_a_missing_verb_fails_the_rollout_with_403(env: Env, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Without `patch` on leaderworkersets the controller cannot start: kube-apiserver's 403, one
    error line, exit 1, and the LWS untouched."""
    from lwsflow.cli import main
    from lwsflow.controller.kube.resources import LWS
    from lwsflow.controller.rollout import gate

    base = lws_manifest("m", replicas=2)
    env.create_ready(base)
    sa = _install_rbac(env, tmp_path, drop_verb=("leaderworkersets", "patch"))
    mf = tmp_path / "m.yaml"
    mf.write_text(dump_yaml(new_release(base)))
    code = main(["rollout", "lws/m", "-n", NS, "--kubeconfig", str(sa), "--manifest", str(mf),
                 "--stages", "1,100%"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0, err
    assert err == ('error: 403 Forbidden: leaderworkersets.leaderworkerset.x-k8s.io "m" is forbidden: User '
                   '"system:serviceaccount:lwsflow-system:lwsflow-rollout" cannot patch resource '
                   f'"leaderworkersets" in API group "leaderworkerset.x-k8s.io" in the namespace "{NS}"')
    live = env.kube.get(LWS, NS, "m")
    assert gate.partition(live) == 0 and live["metadata"]["generation"] == 1


@pytest.mark.parametrize("drop", [None, ("services", "list")], ids=["shipped", "without-services-list"])
def test_smoke_rollout_with_only_the_service_account(served: Env, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     drop: tuple[str, str] | None) -> None:
    """`lwsflow rollout --smoke` with the ServiceAccount's token: the shipped role lets the smoke read
    everything it checks (the leaders' Service included), so it passes. Without `services list` the
    smoke does not quietly skip the Service: its 403 fails the stage, in the API server's words."""
    from lwsflow.cli import main

    env = served
    port = _ENGINE_PORT.port
    base = serving("m", port, replicas=2)
    env.create_ready(base)
    service_for(env, "m", port)
    sa = _install_rbac(env, tmp_path, drop_verb=drop)
    mf = tmp_path / "m.yaml"
    mf.write_text(dump_yaml(new_release(base)))
    report = tmp_path / "m.json"
    code = main(["rollout", "lws/m", "-n", NS, "--kubeconfig", str(sa), "--manifest", str(mf),
                 "--stages", "1,100%", "--smoke", "--report", str(report)])
    out = capsys.readouterr()
    if drop is None:
        assert code == 0 and "succeeded" in out.out, out
        assert '"smoke passed"' in report.read_text() and "orbidden" not in out.out + out.err
        return
    cause = (f'service@lws/m: cannot list services in {NS}: 403 Forbidden: services is forbidden: User '
             '"system:serviceaccount:lwsflow-system:lwsflow-rollout" cannot list resource "services" in '
             f'API group "" in the namespace "{NS}"')
    assert code != 0 and "rolled-back" in out.out, out
    assert f"stage 1 hook failed: smoke failed: {cause}" in out.out, out.out
