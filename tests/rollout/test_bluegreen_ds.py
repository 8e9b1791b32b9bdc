"""Blue-green of a DisaggregatedSet on the embedded cluster (issue 18): a second DS ``<name>-<rev>`` in
its own InferencePool, HTTPRoute weights shifted stage by stage, traffic observed through the stand-in
llm-d router, the old DS and pool deleted at the end; a slower green DS caught by analysis and shifted
back; a capacity refusal naming the missing GPUs; a controller SIGKILLed mid-shift and resumed.

The pools tell the two DS's pods apart by ``disaggregatedset.x-k8s.io/name``, which the DS controller
puts on every pod of every role (lws-semantics §f "Child LWS, labels, Services": automatic labels on the
LWS and the pod templates). Readiness of green is the DS gate (§f "Status": per role
``desired*slices == replicas == ready == updated``), from the child LWS where the DS controller writes
no status, as released upstream controllers (v0.9.0, v0.10.0) do.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, HTTP_ROUTE, INFERENCE_POOL, LWS
from lwsflow.controller.rollout import bluegreen_kinds as K
from lwsflow.controller.rollout import bluegreen_plan as P
from lwsflow.controller.rollout import gate, session
from lwsflow.controller.rollout.ds import DsKind
from lwsflow.controller.rollout.hooks import HookContext, HookResult
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.pipelines.cli import main
from lwsflow.sim.config import ClusterConfig, ImageProfile, PoolConfig, Timings
from lwsflow.sim.router import Router
from lwsflow.sim.testing import EmbeddedCluster, StoreRecorder

NS = "default"
MODEL = "chat-model"
BLUE = "sha256:" + "1" * 64
GREEN = "sha256:" + "3" * 64  # as fast as blue
SLOWER = "sha256:" + "2" * 64  # ready, but 40% slower TTFT
ROUTES = "httproutes.gateway.networking.k8s.io"
POOLS = "inferencepools.inference.networking.k8s.io"
REF = {"group": "inference.networking.k8s.io", "kind": "InferencePool"}
ROLES = ("prefill", "decode")
N_REQUESTS = 200  # per weight stage, through the router
TOLERANCE = 0.1  # |observed green share - weight| over 200 seeded draws: 2.8 sigma at 50%


class Env:
    def __init__(self, tmp: Path, *, speed: float = 50.0, gpus_per_node: int = 8,
                 ds_writes_status: bool = True) -> None:
        self.tmp = tmp
        self.port = random.randint(20_000, 60_000)
        cfg = ClusterConfig(
            pools=[PoolConfig(name="h100", count=1, gpus_per_node=gpus_per_node, gpu_product="H100")],
            timings=Timings(pull_gbps=100.0, image_gb=0.1, cpu_image_gb=0.1, container_start_s=1.0,
                            weight_gb=0.0),
            images={BLUE: ImageProfile(ttft_s=0.045), GREEN: ImageProfile(ttft_s=0.045),
                    SLOWER: ImageProfile(ttft_s=0.063)},
            ds_writes_status=ds_writes_status)
        self.sim = EmbeddedCluster(tmp, cfg, speed=speed, engines=True,
                                   engine_options={"side_channel_port": 0}).start()
        self.kube = Kube.connect(str(self.sim.kubeconfig))
        self.rec = StoreRecorder(self.sim, keys=[ROUTES, POOLS])

    def ds(self, digest: str, gpus: int = 1) -> dict[str, Any]:
        def role(name: str) -> dict[str, Any]:
            labels = {L.MODEL: "chat", L.ROLE: name}
            return {"name": name, "metadata": {"labels": dict(labels)}, "spec": {
                "replicas": 2, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                    "metadata": {"labels": dict(labels), "annotations": {
                        "sim.lwsflow.io/load-seconds": "10", L.SERVED_MODEL: MODEL,
                        L.SERVING_PORT: str(self.port)}},
                    "spec": {"nodeSelector": {L.NODE_POOL: "h100"}, "containers": [{
                        "name": "engine", "image": f"r.example/vllm@{digest}",
                        "resources": {"limits": {L.GPU_RESOURCE: gpus}}}]}}}}}
        return {"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND,
                "metadata": {"name": "chat", "namespace": NS, "labels": {L.MODEL: "chat"}},
                "spec": {"roles": [role(r) for r in ROLES]}}

    def deploy_blue(self, gpus: int = 1) -> None:
        self.kube.create(DS, NS, self.ds(BLUE, gpus))
        self.kube.create(INFERENCE_POOL, NS, {
            "apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": "chat", "namespace": NS},
            "spec": {"selector": {"matchLabels": {L.MODEL: "chat", L.WORKER_INDEX: "0"}},
                     "targetPorts": [{"number": self.port}],
                     "endpointPickerRef": {"name": "chat-epp", "port": {"number": 9002}}}})
        self.kube.create(HTTP_ROUTE, NS, {
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "chat", "namespace": NS},
            "spec": {"parentRefs": [{"name": "gw"}],
                     "rules": [{"backendRefs": [{**REF, "name": "chat", "weight": 100}]}]}})
        kind, end = DsKind(self.kube, NS), time.monotonic() + 60
        while not kind.gate(obj := self.kube.get(DS, NS, "chat"), 1).passed:
            assert time.monotonic() < end, f"blue never became ready: {kind.gate(obj, 1).detail}"
            time.sleep(0.1)

    def manifest(self, digest: str) -> Path:
        path = self.tmp / f"green-{digest[7:12]}.yaml"
        path.write_text(yaml.safe_dump(self.ds(digest)))
        return path

    def green_weights(self) -> list[int | None]:
        """Green's weight after each recorded write of the route (None: no green backendRef)."""
        out: list[int | None] = []
        for rec in self.rec.entries(ROUTES, "chat"):
            st = P.BlueGreenState.from_route(rec.object)
            w = P.green_weight_of(rec.object, st.green.pool) if st.green else None
            if not out or out[-1] != w:
                out.append(w)
        return out

    def children(self) -> list[dict[str, Any]]:
        return self.kube.list(LWS, NS)[0]

    def close(self) -> None:
        self.rec.stop()
        self.kube.api.close()
        self.sim.close()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.close()


def _share_hook(router: Router, seen: list[tuple[int, float, set[str]]]) -> Any:
    """At each weight stage: N seeded requests through the router; the share served by green's pods."""
    def traffic(ctx: HookContext) -> HookResult:
        router.routes.clear()
        body = {"model": MODEL, "prompt": "hi", "max_tokens": 1}
        with httpx.Client(timeout=30) as http, ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda _i: http.post(f"{router.url}/v1/completions", json=body).status_code,
                                  range(N_REQUESTS)))
        assert codes == [200] * N_REQUESTS
        green = ctx.compare["decode"][0]  # the green DS: its child LWS and pods start with its name
        pods = Counter(r.decode.pod for r in router.routes)
        share = sum(n for pod, n in pods.items() if pod.startswith(f"{green}-")) / N_REQUESTS
        seen.append((ctx.target_groups, share, set(pods)))
        return HookResult(True, f"green share {share:.2f} at weight {ctx.target_groups}")
    return traffic


def _narrowed_before_green_pods(env: Env) -> None:
    """The blue pool was narrowed to the blue DS's pods by a write made while no green pod existed."""
    writes = [r for r in env.rec.entries(POOLS, "chat") if r.type != "DELETED"
              and L.DS_NAME in r.object["spec"]["selector"]["matchLabels"]]
    assert writes, "the blue pool was never narrowed"
    first = writes[0]
    assert first.object["spec"]["selector"]["matchLabels"] == {L.MODEL: "chat", L.WORKER_INDEX: "0",
                                                                L.DS_NAME: "chat"}
    ds_of = {(p["metadata"].get("labels") or {}).get(L.DS_NAME) for p in first.pods.values()}
    assert ds_of == {"chat"}, ds_of


def test_ds_blue_green_shifts_weights_stage_by_stage_and_deletes_blue(env: Env) -> None:
    env.deploy_blue()
    seen: list[tuple[int, float, set[str]]] = []
    lines: list[str] = []
    with Router(env.sim.store, seed=11) as router:
        opts = RolloutOptions(bake_s=30, deadline_s=600, hooks=[_share_hook(router, seen)])
        out = session.run(env.kube, session.clock_for(env.kube), session.parse_target("ds/chat", NS), opts,
                          manifest=env.manifest(GREEN), strategy="blue-green", weights=[10, 50, 100],
                          log=lines.append)
    assert out.result == "succeeded", out.message
    cap = next(line for line in lines if line.startswith("capacity blue-green: both revisions fit"))
    assert all("DisaggregatedSet chat-" in cap and f"role {r} (pool h100): 2 of 2 group(s)" in cap
               for r in ROLES), cap
    _narrowed_before_green_pods(env)
    assert env.green_weights() == [None, 0, 10, 50, 100]
    for weight, share, pods in seen:
        assert abs(share - weight / 100) <= TOLERANCE, (weight, share)
        assert all(p.startswith("chat-") and "-decode-" in p for p in pods), pods  # decode pods only
    assert [w for w, _s, _p in seen] == [10, 50, 100] and seen[-1][1] == 1.0
    st = P.BlueGreenState.from_route(env.kube.get(HTTP_ROUTE, NS, "chat"))
    assert st.phase == P.SUCCEEDED and st.green is not None and st.green.kind == "ds"
    green = st.green.pair
    assert green == f"chat-{K.ds_revision(env.ds(GREEN))}"
    rules = env.kube.get(HTTP_ROUTE, NS, "chat")["spec"]["rules"]
    assert rules[0]["backendRefs"] == [{**REF, "name": st.green.pool, "weight": 100}]
    # only green is left: its DS, its children (by owner reference), its pool selecting its pods only
    assert [o["metadata"]["name"] for o in env.kube.list(DS, NS)[0]] == [green]
    kids = env.children()
    assert kids and {o["metadata"]["labels"][L.DS_NAME] for o in kids} == {green}
    pools = env.kube.list(INFERENCE_POOL, NS)[0]
    assert [p["metadata"]["name"] for p in pools] == [green]
    assert pools[0]["spec"]["selector"]["matchLabels"] == {L.MODEL: "chat", L.WORKER_INDEX: "0",
                                                           L.DS_NAME: green}
    assert out.message.endswith(f"traffic on ds/{green}")
    assert out.report.kind == L.DS_KIND


SPEC = {"window": "5s", "metrics": [{
    "name": "ttft-p95", "initialDelay": "8s", "interval": "1s", "count": 3, "failureLimit": 1,
    "inconclusiveLimit": 1,
    "provider": {"prometheus": {"query": (
        'histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket'
        '{namespace="{{namespace}}",lws="{{lws}}",revision="{{revision}}"}[{{window}}])))')}},
    "compare": {"mode": "relative", "tolerance": 10}}]}


def test_slower_green_ds_is_caught_at_the_first_weight_stage_and_shifted_back(tmp_path: Path) -> None:
    """Analysis per role (green DS's role against blue DS's role; Prometheus labels a DS's pods with the
    DS's name) fails at 50%; the route goes back to blue alone and the green DS is deleted."""
    from lwsflow.components.loadgen import LoadGenerator, LoadSpec

    env = Env(tmp_path, speed=20.0)  # analysis measures in wall time (Prometheus's clock)
    try:
        env.deploy_blue()
        spec, rep = tmp_path / "analysis.yaml", tmp_path / "report.json"
        spec.write_text(yaml.safe_dump(SPEC))
        with Router(env.sim.store, seed=5) as router, \
                LoadGenerator(LoadSpec(model=MODEL, rate=40, seed=3, max_tokens=(2, 4), prompt_words=(20, 40),
                                       stream_share=0.0), lambda: [router.url]) as load:
            rc = main(["rollout", "run", "ds/chat", "-n", NS, "--kubeconfig", str(env.sim.kubeconfig),
                       "--manifest", str(env.manifest(SLOWER)), "--strategy", "blue-green",
                       "--weights", "50,100", "--analysis", str(spec), "--prometheus", "local",
                       "--report", str(rep)])
        assert load.stats.ok > 0 and load.stats.errors <= 0.03 * load.stats.sent, load.stats
        report = json.loads(rep.read_text())
        assert rc == 1 and report["result"] == "rolled-back", report
        assert len(report["stages"]) == 1  # never went past the first weight stage
        first = report["stages"][0]
        assert first["result"] == "failed" and first["target_groups"] == 50
        failed = [m for m in first["analysis"] if m["phase"] == "failed"]
        assert failed and all(m["value"] > m["baseline"] * 1.1 for m in failed), first["analysis"]
        assert {m["role"] for m in first["analysis"]} <= set(ROLES)
        # weights shifted back (green's backendRef removed), green DS and its children deleted, blue as it was
        assert env.green_weights() == [None, 0, 50, None]
        rules = env.kube.get(HTTP_ROUTE, NS, "chat")["spec"]["rules"]
        assert rules[0]["backendRefs"] == [{**REF, "name": "chat", "weight": 100}]
        assert [o["metadata"]["name"] for o in env.kube.list(DS, NS)[0]] == ["chat"]
        end = time.monotonic() + 30  # the children go by owner reference (garbage collection)
        while {o["metadata"]["labels"][L.DS_NAME] for o in env.children()} != {"chat"}:
            assert time.monotonic() < end, [o["metadata"]["name"] for o in env.children()]
            time.sleep(0.1)
        assert [p["metadata"]["name"] for p in env.kube.list(INFERENCE_POOL, NS)[0]] == ["chat"]
        blue = env.kube.get(DS, NS, "chat")
        assert all(BLUE in r["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
            "image"] for r in blue["spec"]["roles"])
        assert DsKind(env.kube, NS).gate(blue, 1).passed
    finally:
        env.close()


def test_ds_capacity_refusal_names_missing_gpus_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = Env(tmp_path, gpus_per_node=8)
    try:
        env.deploy_blue(gpus=2)  # 2 roles x 2 groups x 2 GPUs: 8 of 8 GPUs in use
        route_before = env.kube.get(HTTP_ROUTE, NS, "chat")
        pool_before = env.kube.get(INFERENCE_POOL, NS, "chat")
        rc = main(["rollout", "run", "ds/chat", "-n", NS, "--kubeconfig", str(env.sim.kubeconfig),
                   "--manifest", str(env.manifest(GREEN)), "--strategy", "blue-green"])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1, err
        # green wants 1 GPU per pod: 2 roles x 2 groups, none placed
        assert "strategy" in err and "missing 4 GPUs in pool h100" in err, err
        assert all(f"role {r} (pool h100): 0 of 2 group(s) x 1 GPUs placed in 0 free GPUs" in err
                   for r in ROLES), err
        after = env.kube.get(HTTP_ROUTE, NS, "chat")
        assert after["metadata"]["resourceVersion"] == route_before["metadata"]["resourceVersion"]
        assert env.kube.get(INFERENCE_POOL, NS, "chat")["metadata"]["resourceVersion"] == \
            pool_before["metadata"]["resourceVersion"]
        assert [o["metadata"]["name"] for o in env.kube.list(DS, NS)[0]] == ["chat"]
    finally:
        env.close()


def test_sigkill_mid_shift_then_resume_on_a_ds_without_status(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The controller is killed (SIGKILL) while checking the 50% stage; a rerun re-checks that stage
    and goes on; no weight is written twice (docs/rollout.md "Crash safety"). The DS controller writes
    no status (upstream v0.9.0/v0.10.0), so green's readiness comes from its child LWS."""
    env = Env(tmp_path, ds_writes_status=False)
    try:
        env.deploy_blue()
        assert "observedGeneration" not in (env.kube.get(DS, NS, "chat").get("status") or {})
        mf = env.manifest(GREEN)
        base = [str(Path(sys.executable).parent / "lwsflow"), "rollout", "run", "ds/chat", "-n", NS,
                "--kubeconfig", str(env.sim.kubeconfig), "--manifest", str(mf), "--strategy", "blue-green",
                "--weights", "10,50,100", "--bake", "20s"]
        kill = ["--hook", 'sh -c "test $LWSFLOW_STAGE != 2 || kill -9 $PPID"']
        env_vars = dict(os.environ, LWSFLOW_LOG="")
        first = subprocess.run(base + kill, capture_output=True, text=True, timeout=120, env=env_vars)
        assert first.returncode == -9, first.stdout + first.stderr
        assert f"green chat-{K.ds_revision(env.ds(GREEN))} ready: ds {gate.CHILDREN_SOURCE}" in first.stdout
        st = P.BlueGreenState.from_route(env.kube.get(HTTP_ROUTE, NS, "chat"))
        assert (st.phase, st.stage, st.passed) == (P.SHIFTING, 1, 1)
        assert env.green_weights() == [None, 0, 10, 50]
        kc = ["-n", NS, "--kubeconfig", str(env.sim.kubeconfig)]
        assert main(["rollout", "status", "ds/chat", *kc]) == 0
        row = json.loads(capsys.readouterr().out.splitlines()[0])
        assert (row["strategy"], row["phase"], row["stage"], row["passed"], row["weights"], row["green"]) == \
            ("blue-green", P.SHIFTING, 2, 1, [10, 50, 100], st.green.pair)
        # a partition rollout of the blue DS is refused while the blue-green is in progress
        assert main(["rollout", "run", "ds/chat", *kc, "--manifest", str(mf)]) == 2
        err = capsys.readouterr().err
        assert "blue-green" in err and "--strategy blue-green to resume it" in err
        # the rerun smoke-tests green (ds/<green>) at each stage it checks
        second = subprocess.run([*base, "--smoke", "--report", str(tmp_path / "rep.json")],
                                capture_output=True, text=True, timeout=180, env=env_vars)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "succeeded" in second.stdout and "stage-2-passed" in second.stdout
        stages = json.loads((tmp_path / "rep.json").read_text())["stages"]
        assert [(s["target_groups"], s["hooks"]) for s in stages] == [(50, ["smoke passed"]),
                                                                       (100, ["smoke passed"])], stages
        assert "stage-2-shifted" not in second.stdout  # the 50% weights were not written again
        assert env.green_weights() == [None, 0, 10, 50, 100]
        final = P.BlueGreenState.from_route(env.kube.get(HTTP_ROUTE, NS, "chat"))
        assert final.phase == P.SUCCEEDED
        assert [o["metadata"]["name"] for o in env.kube.list(DS, NS)[0]] == [st.green.pair]
        # a rerun after the end reports the recorded outcome and writes nothing
        rv = env.kube.get(HTTP_ROUTE, NS, "chat")["metadata"]["resourceVersion"]
        third = subprocess.run(base, capture_output=True, text=True, timeout=60, env=env_vars)
        assert third.returncode == 0 and "succeeded" in third.stdout, third.stdout + third.stderr
        assert env.kube.get(HTTP_ROUTE, NS, "chat")["metadata"]["resourceVersion"] == rv
    finally:
        env.close()


def test_cli_refuses_ds_blue_green_misuse(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    kc = ["--kubeconfig", str(env.sim.kubeconfig)]
    assert main(["rollout", "run", "ds/x", "--strategy", "blue-green", *kc]) == 2
    assert "--manifest" in capsys.readouterr().err
    assert main(["rollout", "run", "ds/x", "--strategy", "blue-green", "--auto-budget", "--manifest", "m",
                 *kc]) == 2
    assert "--auto-budget" in capsys.readouterr().err
    # no blue DS, then a blue DS that no InferencePool selects: one line each, nothing created
    bg = ["rollout", "run", "ds/chat", "--strategy", "blue-green", "--manifest", str(env.manifest(GREEN)),
          *kc]
    assert main(bg) == 2
    assert "target: DisaggregatedSet default/chat not found" in capsys.readouterr().err
    env.kube.create(DS, NS, env.ds(BLUE))
    assert main(bg) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "exactly one InferencePool in default selecting the leader pods of chat; found none" in err, err
    assert [o["metadata"]["name"] for o in env.kube.list(DS, NS)[0]] == ["chat"]


# -- the DS part, from its inputs alone ----------------------------------------------------------------


def _ds(name: str = "chat", slices: int = 1, role_names: tuple[str, ...] = ROLES) -> dict[str, Any]:
    roles = [{"name": r, "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
        "metadata": {"labels": {L.MODEL: "chat", L.ROLE: r, L.DS_NAME: "spoofed"}},
        "spec": {"containers": [{"name": "e", "image": "vllm:2",
                                 "resources": {"limits": {L.GPU_RESOURCE: 4}}}]}}}}} for r in role_names]
    return {"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND,
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "7", "uid": "u",
                         "annotations": {"rollout.lwsflow.io/phase": "Succeeded", "keep": "me"}},
            "spec": {"slices": slices, "roles": roles}, "status": {"observedGeneration": 1}}


def test_ds_green_names_objects_and_selectors() -> None:
    m = _ds()
    rev = K.ds_revision(m)
    assert len(rev) == P.REV_LEN and rev == K.ds_revision(_ds())
    assert rev != K.ds_revision(_ds(role_names=("p", "d")))
    green = K.ds_green_side("chat", rev, m)
    assert green == P.Side(f"chat-{rev}", f"chat-{rev}", {}, "ds")
    assert P.Side.from_json(green.to_json()) == green
    assert P.Side.from_json('{"pair":"c","pool":"c","lws":{}}').kind == "pair"  # state from before
    g = K.green_ds(m, green, rev, "ns")
    assert g["metadata"]["name"] == green.pair and g["metadata"]["labels"][L.REVISION] == rev
    assert g["metadata"]["annotations"] == {"keep": "me"} and "status" not in g
    assert "resourceVersion" not in g["metadata"] and "uid" not in g["metadata"]
    # a second blue-green from that green strips its suffix instead of stacking one
    assert K.ds_base_name(green.pair, g) == "chat"
    # the DS controller's labels win over the role's own (lws-semantics §f "Automatic labels")
    assert K.ds_leader_labels(g)["decode"] == {L.MODEL: "chat", L.ROLE: "decode", L.DS_NAME: green.pair,
                                               L.DS_ROLE: "decode"}
    kind = K.DsBlueGreen(None, "ns")  # type: ignore[arg-type]  # the pure methods only
    pool = {"metadata": {"name": "chat"}, "spec": {"selector": {"matchLabels": {L.MODEL: "chat",
                                                                                  L.WORKER_INDEX: "0"}},
                                                     "targetPorts": [{"number": 8000}]}}
    blue = {"": {**m, "metadata": {**m["metadata"], "name": "chat"}}}
    match = kind.narrowed_selector(pool, "chat", blue)
    assert match == {L.MODEL: "chat", L.WORKER_INDEX: "0", L.DS_NAME: "chat"}
    gp = kind.green_pool({**pool, "spec": {**pool["spec"], "selector": {"matchLabels": match}}}, green, rev)
    assert gp["spec"]["selector"]["matchLabels"] == {L.MODEL: "chat", L.WORKER_INDEX: "0",
                                                     L.DS_NAME: green.pair}
    assert gp["spec"]["targetPorts"] == [{"number": 8000}]
    green_leaders = K.ds_leader_labels(g).values()
    blue_leaders = K.ds_leader_labels(blue[""]).values()
    assert all(P.selects(gp, lb) and not P.selects({"spec": {"selector": {"matchLabels": match}}}, lb)
               for lb in green_leaders)
    assert all(P.selects({"spec": {"selector": {"matchLabels": match}}}, lb) and not P.selects(gp, lb)
               for lb in blue_leaders)
    # capacity: every role at replicas x slices groups of its template
    objs = kind.capacity_objs([K.green_ds(_ds(slices=3), green, rev, "ns")])
    assert [(o["metadata"]["name"], o["spec"]["replicas"]) for o in objs] == \
        [(f"{green.pair} role prefill", 6), (f"{green.pair} role decode", 6)]


def test_ds_green_name_must_leave_room_for_child_names() -> None:
    """The DS webhook refuses ``len(ds) + len(role) + 3 + slice digits + 8 + 4 > 63`` (§f
    "Validation"); green's name is refused before anything is written, naming the field."""
    name = "d" * 31
    rev = "abcdef12"
    K.ds_green_side(name, rev, _ds(name))  # green: 40 + "prefill" 7 + 3 + 1 slice digit + 12 = 63
    with pytest.raises(InvalidInput, match="shorten the DisaggregatedSet's name") as e:
        K.ds_green_side(name, rev, _ds(name, slices=11))  # slices 0..10: 2 digits, 64
    assert e.value.field == "target"
