"""`lwsflow rollout` in-process: exit codes, one-line errors, capacity, pause/resume/status/abort, GitOps."""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from pathlib import Path

import pytest

from lwsflow.cli import main
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.status import observed_current
from lwsflow.controller.kube.resources import DS, LWS
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.engine import Interrupted, LwsRollout, RolloutOptions, Wiring
from lwsflow.controller.yamlio import dump_yaml, dump_yaml_documents
from reliability.rollout_env import NS, Env, ds_manifest, lws_manifest, make_env, new_release


def cli(env: Env, *args: str) -> list[str]:
    return ["rollout", *args, "-n", NS, "--kubeconfig", str(env.kubeconfig)]


@pytest.mark.parametrize(("args", "field"), [
    pytest.param(["lws/m", "--stages", "50%,25%,100%"], "stages", id="stages_decreasing"),
    pytest.param(["lws/m", "--stages", "1,50%"], "stages", id="last_not_all"),
    pytest.param(["lws/m", "--bake", "soon"], "bake", id="bad_bake"),
    pytest.param(["lws/Not_A_Name"], "target", id="bad_target"),
    pytest.param(["deploy/m"], "target", id="unknown_kind"),
    pytest.param(["lws/missing"], "target", id="not_found"),
    pytest.param(["lws/m", "--manifest", "/nonexistent.yaml"], "manifest", id="manifest_missing"),
    pytest.param(["pause"], "target", id="action_without_target"),
    pytest.param(["pause", "ds/m"], "target", id="ds_cannot_pause"),
])
def test_bad_input_is_one_line_exit_2(env: Env, capsys: pytest.CaptureFixture[str], args: list[str],
                                      field: str) -> None:
    env.create_ready(lws_manifest("m", replicas=2))
    if args[-1] == "ds/m":
        env.create_ready(__import__("reliability.rollout_env", fromlist=["ds_manifest"]).ds_manifest("m"))
    assert main(cli(env, *args)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and field in err and "Traceback" not in err
    assert gate.partition(env.kube.get(LWS, NS, "m")) == 0  # nothing was touched


def test_rollout_with_report_exit_0(env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = lws_manifest("m", replicas=4)
    env.create_ready(base)
    mf = tmp_path / "m.yaml"
    mf.write_text(dump_yaml(new_release(base)))
    rep = tmp_path / "out" / "report.json"
    assert main(cli(env, "lws/m", "--manifest", str(mf), "--stages", "1,50%,100%", "--report", str(rep))) == 0
    doc = json.loads(rep.read_text())
    assert doc["result"] == "succeeded" and [s["index"] for s in doc["stages"]] == [1, 2, 3]
    assert all(s["api_requests"] > 0 and s["started"] <= s["ended"] for s in doc["stages"])
    assert doc["min_ready_groups"] >= doc["floor"] == 3
    assert "succeeded" in capsys.readouterr().out
    # status reads the persisted state
    assert main(cli(env, "status", "lws/m")) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["phase"] == "Succeeded" and row["passed"] == 3


def test_capacity_refused_then_auto_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = make_env(tmp_path, gpu_nodes=3)
    try:
        base = lws_manifest("g", replicas=2, size=1, gpus=8, surge=2, unavailable=0)
        env.create_ready(base)  # 2 of 3 nodes busy: 8 free GPUs, surge wants 2 x 8
        mf = tmp_path / "g.yaml"
        mf.write_text(dump_yaml(new_release(base)))
        assert main(cli(env, "lws/g", "--manifest", str(mf), "--stages", "1,100%")) == 2
        err = capsys.readouterr().err
        assert "2 surge group(s) x 8 GPUs do NOT fit" in err and "8 free GPUs" in err
        assert gate.partition(env.kube.get(LWS, NS, "g")) == 0
        assert main(cli(env, "lws/g", "--manifest", str(mf), "--stages", "1,100%", "--auto-budget")) == 0
        assert "--auto-budget" in capsys.readouterr().out
        final = env.kube.get(LWS, NS, "g")
        # the first fallback that fits keeps the most availability: one surge group (the free node)
        assert gate.max_surge(final) == 1 and gate.max_unavailable(final) == 0
        assert gate.lws_fully_rolled(final).passed
    finally:
        env.close()


def test_bigger_template_refused_before_anything_moves(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Issue: 1 -> 8 GPUs per pod passed the old check (same GPUs assumed) and died at a deadline."""
    env = make_env(tmp_path, gpu_nodes=2)
    try:
        base = lws_manifest("big", replicas=2, size=2, gpus=1)
        env.create_ready(base)  # 4 x 1 GPU on 16
        bigger = new_release(base)
        bigger["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
            "resources"]["limits"][L.GPU_RESOURCE] = 8  # 2 groups x 2 pods x 8 = 32 > 16
        mf = tmp_path / "big.yaml"
        mf.write_text(dump_yaml(bigger))
        for extra in ((), ("--auto-budget",)):  # no budget makes 32 GPUs out of 16
            assert main(cli(env, "lws/big", "--manifest", str(mf), "--stages", "1,100%", *extra)) == 2
            err = capsys.readouterr().err.strip()
            assert err.count("\n") == 0 and "leaderWorkerTemplate" in err
            assert "2 group(s) of 2 GPUs replaced by groups of 16 GPUs" in err and "do NOT fit" in err
        live = env.kube.get(LWS, NS, "big")
        assert gate.partition(live) == 0 and not state.RolloutState.from_object(live).id
        assert live["spec"]["leaderWorkerTemplate"] == env.rec_first("big")["spec"]["leaderWorkerTemplate"]
    finally:
        env.close()


def _gpu_ds(name: str) -> dict:
    doc = ds_manifest(name, prefill=1, decode=1)
    for role in doc["spec"]["roles"]:
        pod = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
        pod["containers"][0]["resources"] = {"limits": {L.GPU_RESOURCE: 8}}
        pod["nodeSelector"] = {L.NODE_POOL: "h100"}
    return doc


def test_ds_capacity_checked_per_role_then_auto_budget(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Part 3: a DS role's default surge (maxSurge 1, §f) needs a free node; none is free."""
    env = make_env(tmp_path, gpu_nodes=2)
    try:
        base = _gpu_ds("dcap")
        env.create_ready(base)  # prefill and decode fill both 8-GPU nodes
        mf = tmp_path / "dcap.yaml"
        mf.write_text(dump_yaml(new_release(base)))
        assert main(cli(env, "ds/dcap", "--manifest", str(mf))) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0
        assert "role prefill (pool h100): 1 surge group(s) x 8 GPUs do NOT fit" in err
        live = env.kube.get(DS, NS, "dcap")
        assert live["spec"]["roles"] == env.rec_first("dcap")["spec"]["roles"]  # nothing applied
        assert main(cli(env, "ds/dcap", "--manifest", str(mf), "--auto-budget")) == 0
        out = capsys.readouterr().out
        assert "--auto-budget" in out and "maxSurge 0, maxUnavailable 1" in out
        final = env.kube.get(DS, NS, "dcap")
        assert gate.ds_gate(final).passed
        for role in final["spec"]["roles"]:
            assert role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
                "image"] == "vllm:2"
            ruc = role["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
            assert (ruc["maxSurge"], ruc["maxUnavailable"]) == (0, 1)
    finally:
        env.close()


def test_pause_status_resume(env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = lws_manifest("p", replicas=4, load_s=120)  # 0.6 s wall a stage: time to pause
    env.create_ready(base)
    result: dict[str, object] = {}

    def run() -> None:
        result["out"] = LwsRollout(env.kube, NS, "p", RolloutOptions(stages="1,2,3,100%", deadline_s=600),
                                   env.clock(), manifest=new_release(base)).run()
    t = threading.Thread(target=run)
    t.start()
    end = time.monotonic() + 30
    while ("p", 1) not in env.rec.at_pass and time.monotonic() < end:
        time.sleep(0.01)
    assert main(cli(env, "pause", "lws/p")) == 0
    assert "mid-stage" in capsys.readouterr().out  # it says what it does: no wait for a stage end
    t.join(30)
    assert result["out"].result == "paused"  # type: ignore[attr-defined]
    held = list(env.rec.partitions["p"])
    env.cluster.advance(100)  # 100 virtual seconds at once: nothing moves while paused
    assert env.rec.partitions["p"] == held and held[-1] >= 1
    capsys.readouterr()
    assert main(cli(env, "status", "lws/p")) == 0
    assert json.loads(capsys.readouterr().out.strip())["paused"] is True
    assert main(cli(env, "resume", "lws/p")) == 0
    assert env.rec.partitions["p"] == [0, 4, 3, 2, 1, 0]
    assert state.RolloutState.from_object(env.kube.get(LWS, NS, "p")).phase == state.SUCCEEDED


def test_abort_rolls_back(env: Env) -> None:
    base = lws_manifest("a", replicas=4)
    env.create_ready(base)

    def stop(name: str) -> None:
        if name == "stage-2-passed":
            raise Interrupted(name)
    with pytest.raises(Interrupted):
        LwsRollout(env.kube, NS, "a", RolloutOptions(stages="1,2,3,100%"), env.clock(),
                   manifest=new_release(base), wiring=Wiring(on_step=stop)).run()
    assert main(cli(env, "abort", "lws/a")) == 1  # rolled back is not success
    final = env.kube.get(LWS, NS, "a")
    assert gate.lws_fully_rolled(final).passed
    worker = final["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["spec"]["containers"][0]["image"] == "vllm:1"
    assert state.RolloutState.from_object(final).phase == state.ROLLED_BACK
    assert main(cli(env, "abort", "lws/a")) == 2  # nothing in progress any more


def _synced(doc: dict, partition: int) -> dict:
    """What Argo CD applies: the rendered LWS, frozen by the overlay at ``partition`` (= replicas)."""
    out = copy.deepcopy(doc)
    out["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = partition
    return out


def _groups_on(env: Env, name: str, image: str) -> int:
    pods = [p for p in env.rec.pods.values() if (p["metadata"].get("labels") or {}).get(L.NAME) == name
            and not p["metadata"].get("deletionTimestamp")]
    return sum(1 for p in pods if (p["metadata"].get("labels") or {}).get(L.WORKER_INDEX) == "0"
               and p["spec"]["containers"][0]["image"] == image)


def _rested(env: Env, name: str, load_times: int = 4) -> dict:
    """The LWS once ``load_times`` model loads (20 s) of cluster time passed and the LWS controller
    observed its latest generation: waited on as conditions, not a wall-clock sleep (robust to load)."""
    clock = env.clock()
    after = clock.now() + load_times * 20
    return env.wait(lambda o: observed_current(o) and clock.now() >= after, name=name)


def test_gitops_mode_only_moves_the_partition(env: Env) -> None:
    """Issue 4: a synced template lands frozen, only the controller's stages move it, and a finished
    rollout leaves the partition at replicas so the next synced template is frozen too."""
    base = _synced(lws_manifest("git", replicas=4), 4)
    env.create(base)  # created from the rendered (frozen) manifest: every group still comes up
    env.wait(lambda o: gate.lws_fully_rolled(o).passed, name="git")
    for release in ("vllm:2", "vllm:3"):
        # Argo CD syncs the next template: a plain apply of the rendered, frozen LWS
        env.kube.apply(LWS, _synced(new_release(base, image=release), 4), field_manager="argocd-controller")
        # 4 load-times of cluster time, the new generation observed: an unfrozen LWS (maxUnavailable 1)
        # would have moved by now
        live = _rested(env, "git")
        assert _groups_on(env, "git", release) == 0 and gate.counters(live)["updatedReplicas"] == 0
        assert gate.lws_stage_gate(live, 0).checks["available"]  # frozen at rest stays Available
        env.rec.restart("git", new_image=release)  # this rollout's history starts at the live object
        assert main(cli(env, "lws/git", "--stages", "1,50%,100%")) == 0
        # the controller lowered it stage by stage, then froze it again at rest
        assert env.rec.partitions["git"] == [4, 3, 2, 0, 4]
        final = env.kube.get(LWS, NS, "git")
        assert gate.partition(final) == 4 and gate.lws_fully_rolled(final).passed
        assert _groups_on(env, "git", release) == 4
        st = state.RolloutState.from_object(final)
        assert st.phase == state.SUCCEEDED and st.gitops and st.last_good
    managers = {m["manager"] for m in final["metadata"].get("managedFields") or []}
    assert L.FIELD_MANAGER in managers


def test_gitops_rollback_restores_the_last_good_template(env: Env) -> None:
    base = lws_manifest("g2", replicas=2)
    env.create_ready(base)
    bad = new_release(base, image="vllm:3", **{"sim.lwsflow.io/never-ready": "true"})
    codes = []
    for doc in (new_release(base), bad):  # two GitOps syncs, each followed by a rollout
        doc["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 2
        env.kube.apply(LWS, doc, field_manager="argocd-controller")
        codes.append(main(cli(env, "lws/g2", "--stages", "1,100%", "--deadline", "60s")))
    assert codes == [0, 1]
    final = env.kube.get(LWS, NS, "g2")
    worker = final["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["spec"]["containers"][0]["image"] == "vllm:2"  # the last rollout that succeeded
    assert "sim.lwsflow.io/never-ready" not in worker["metadata"]["annotations"]
    assert gate.lws_fully_rolled(final).passed
    # rolled back AND frozen at rest: Argo CD syncing the bad template again (Git not reverted yet)
    # moves no group
    assert gate.partition(final) == 2 and env.rec.partitions["g2"][-2:] == [0, 2]
    env.kube.apply(LWS, bad, field_manager="argocd-controller")
    _rested(env, "g2")
    assert _groups_on(env, "g2", "vllm:3") == 0 and _groups_on(env, "g2", "vllm:2") == 2


def test_another_manifest_while_one_is_in_progress_is_refused(env: Env, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    base = lws_manifest("busy", replicas=4)
    env.create_ready(base)

    def stop(name: str) -> None:
        if name == "stage-1-passed":
            raise Interrupted(name)
    with pytest.raises(Interrupted):
        LwsRollout(env.kube, NS, "busy", RolloutOptions(stages="1,2,3,100%"), env.clock(),
                   manifest=new_release(base), wiring=Wiring(on_step=stop)).run()
    other = tmp_path / "v3.yaml"
    other.write_text(dump_yaml(new_release(base, image="vllm:3")))
    seen = list(env.rec.partitions["busy"])
    assert main(cli(env, "lws/busy", "--manifest", str(other), "--stages", "1,2,3,100%")) == 2
    assert "another manifest is in progress" in capsys.readouterr().err
    assert env.rec.partitions["busy"] == seen


def test_structured_json_logs(env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    base = lws_manifest("lg", replicas=2)
    env.create_ready(base)
    mf = tmp_path / "lg.yaml"
    mf.write_text(dump_yaml(new_release(base)))
    monkeypatch.setenv("LWSFLOW_LOG", "json")
    logger = logging.getLogger("lwsflow")
    try:
        assert main(cli(env, "lws/lg", "--manifest", str(mf), "--stages", "1,100%")) == 0
    finally:
        logger.handlers[:] = []
        logger.propagate = True
    records = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    events = [r["event"] for r in records if "event" in r]
    assert events[:2] == ["RolloutStarted", "StageStarted"] and events[-1] == "RolloutSucceeded"
    assert all(r["object"] == "LeaderWorkerSet/default/lg" and r["cluster_time"] for r in records
               if "event" in r)


def test_gitops_auto_budget_writes_the_budget_on_the_live_lws(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Without --manifest the template is already live: --auto-budget patches the live budget."""
    env = make_env(tmp_path, gpu_nodes=3)
    try:
        base = _synced(lws_manifest("ga", replicas=2, size=1, gpus=8, surge=2, unavailable=0), 2)
        env.create(base)  # 2 of 3 nodes busy: 8 free GPUs, surge wants 2 x 8
        env.wait(lambda o: gate.lws_fully_rolled(o).passed, name="ga")
        env.kube.apply(LWS, _synced(new_release(base), 2), field_manager="argocd-controller")
        assert main(cli(env, "lws/ga", "--stages", "1,100%")) == 2
        assert "do NOT fit" in capsys.readouterr().err
        assert main(cli(env, "lws/ga", "--stages", "1,100%", "--auto-budget")) == 0
        assert "--auto-budget" in capsys.readouterr().out
        final = env.kube.get(LWS, NS, "ga")
        assert gate.max_surge(final) == 1 and gate.max_unavailable(final) == 0
        assert gate.partition(final) == 2 and gate.lws_fully_rolled(final).passed  # frozen at rest
    finally:
        env.close()


def _interrupted_at_stage_2(env: Env, name: str) -> dict:
    base = lws_manifest(name, replicas=4)
    env.create_ready(base)

    def stop(step: str) -> None:
        if step == "stage-2-passed":
            raise Interrupted(step)
    with pytest.raises(Interrupted):
        LwsRollout(env.kube, NS, name, RolloutOptions(stages="1,2,3,100%"), env.clock(),
                   manifest=new_release(base), wiring=Wiring(on_step=stop)).run()
    return base


@pytest.mark.parametrize("action", ["abort", "pause", "resume", "status"])
def test_action_with_manifest_is_refused_before_any_write(env: Env, tmp_path: Path, action: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13.3: `abort --manifest` wrote the abort annotation and then exited 2; `pause --manifest`
    ignored the file. Every argument is validated before the first request that writes."""
    base = _interrupted_at_stage_2(env, "v")
    mf = tmp_path / "v.yaml"
    mf.write_text(dump_yaml(new_release(base)))
    before = env.kube.get(LWS, NS, "v")
    assert main(cli(env, action, "lws/v", "--manifest", str(mf))) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0 and "manifest" in err
    after = env.kube.get(LWS, NS, "v")
    assert after["metadata"].get("annotations") == before["metadata"].get("annotations")
    assert after["spec"] == before["spec"]
    st = state.RolloutState.from_object(after)
    assert st.active and not st.abort and not st.paused


def test_bad_stages_refused_even_after_success(env: Env, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13.3: stages are validated before the persisted state is looked at: a finished rollout
    does not turn `--stages 50%,25%` into `already succeeded`, exit 0."""
    base = lws_manifest("done", replicas=4)
    env.create_ready(base)
    mf = tmp_path / "done.yaml"
    mf.write_text(dump_yaml(new_release(base)))
    assert main(cli(env, "lws/done", "--manifest", str(mf), "--stages", "1,100%")) == 0
    capsys.readouterr()
    for stages in ("50%,25%", "1,2"):  # decreasing; the last stage not all of spec.replicas=4
        assert main(cli(env, "lws/done", "--stages", stages)) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: stages: ") and err.count("\n") == 0
    assert main(cli(env, "lws/done", "--manifest", str(mf), "--stages", "1,100%")) == 0  # nothing to do
    assert "already succeeded" in capsys.readouterr().out


def test_run_subcommand_and_the_documented_short_form(env: Env, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`rollout run TARGET` is the explicit form; `rollout TARGET` (README, docs/rollout.md) still runs."""
    base = lws_manifest("sub", replicas=2)
    env.create_ready(base)
    mf = tmp_path / "sub.yaml"
    mf.write_text(dump_yaml(new_release(base)))
    assert main(cli(env, "run", "lws/sub", "--manifest", str(mf), "--stages", "1,100%")) == 0
    mf.write_text(dump_yaml(new_release(base, image="vllm:3")))
    assert main(["rollout", "-n", NS, "lws/sub", "--manifest", str(mf), "--stages", "100%",
                 "--kubeconfig", str(env.kubeconfig)]) == 0
    assert "succeeded" in capsys.readouterr().out
    worker = env.kube.get(LWS, NS, "sub")["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["spec"]["containers"][0]["image"] == "vllm:3"


@pytest.mark.parametrize(("args", "hint"), [
    pytest.param(["lws/x", "pause"], "lwsflow rollout pause lws/x", id="action_after_target"),
    pytest.param(["rollback", "lws/x"], "run|pause|resume|promote|abort|status", id="unknown_action"),
])
def test_unknown_forms_get_a_one_line_hint(args: list[str], hint: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rollout", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0 and hint in err


def test_rollout_help_lists_the_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rollout", "--help"]) == 0
    out = capsys.readouterr().out
    for sub in ("run", "pause", "resume", "abort", "status"):
        assert f" {sub} " in out


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_api_names_url_and_kubeconfig_exit_1(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13.5: a dead API server printed `error: 500 InternalError: connection failed:
    NewConnectionError`. It is not an API answer: say where, that nothing answered, which kubeconfig."""
    from lwsflow.sim.kubeconfig import write_kubeconfig

    url = f"https://127.0.0.1:{_free_port()}"
    kc = write_kubeconfig(tmp_path / "kc", url, "t0ken", ca_pem=None)
    t0 = time.monotonic()
    assert main(["rollout", "status", "lws/x", "--kubeconfig", str(kc)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"error: cannot reach the Kubernetes API at {url} (nothing answered; kubeconfig: {kc})"
    assert time.monotonic() - t0 < 15  # bounded retries


def test_api_that_does_not_speak_tls_is_a_tls_error(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A plain-HTTP listener behind an https:// kubeconfig: the TLS handshake fails, and says so."""
    import http.server

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        from lwsflow.sim.kubeconfig import write_kubeconfig

        url = f"https://127.0.0.1:{srv.server_address[1]}"
        kc = write_kubeconfig(tmp_path / "kc", url, "t0ken", ca_pem=None)
        assert main(["rollout", "status", "lws/x", "--kubeconfig", str(kc)]) == 1
    finally:
        srv.shutdown()
        srv.server_close()
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: cannot reach the Kubernetes API at {url} (TLS handshake failed: ")
    assert err.endswith(f"; kubeconfig: {kc})") and err.count("\n") == 0 and "500" not in err


def _gpu_pair(env: Env, name: str) -> dict[str, dict]:
    """A P/D pair filling both 8-GPU nodes: prefill 1 x 8 GPUs, decode 1 x 8 GPUs (maxSurge 1)."""
    docs = {}
    for role, surge, unavailable in (("prefill", 0, 1), ("decode", 1, 0)):
        docs[role] = lws_manifest(f"{name}-{role}", replicas=1, size=1, gpus=8, surge=surge,
                                  unavailable=unavailable, labels={L.PD_PAIR: name, L.ROLE: role})
        env.create_ready(docs[role])
    return docs


def test_pair_capacity_refusal_names_role_and_pool_and_suggests_what_helps(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13.5: the P/D refusal named no role and offered --auto-budget even when no budget fits."""
    env = make_env(tmp_path, gpu_nodes=2)
    try:
        docs = _gpu_pair(env, "pp")
        mf = tmp_path / "pp.yaml"
        mf.write_text(dump_yaml_documents([new_release(docs["prefill"]), new_release(docs["decode"])]))
        assert main(cli(env, "pair/pp", "--manifest", str(mf), "--stages", "100%")) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "role decode (LeaderWorkerSet pp-decode, pool h100)" in err
        assert "pool h100" in err and "--auto-budget" in err  # maxSurge 0 / maxUnavailable 1 fits
        # 16 GPUs per pod: no node has them, so no budget helps and none is offered
        huge = new_release(docs["decode"])
        huge["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
            "resources"]["limits"][L.GPU_RESOURCE] = 16
        mf.write_text(dump_yaml_documents([new_release(docs["prefill"]), huge]))
        assert main(cli(env, "pair/pp", "--manifest", str(mf), "--stages", "100%")) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "role decode" in err and "pool h100" in err
        assert "--auto-budget" not in err and "no budget" in err
        for role in ("prefill", "decode"):
            assert not state.RolloutState.from_object(env.kube.get(LWS, NS, f"pp-{role}")).id
    finally:
        env.close()
