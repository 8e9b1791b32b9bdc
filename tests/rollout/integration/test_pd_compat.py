"""Cross-revision P/D compatibility (issue 17): before a P/D rollout mixes revisions, a canary group per
changed role (outside every Service and pool) hands KV off new prefill -> old decode and old prefill ->
new decode against the stand-in engines; an incompatible KV layout fails that hand-off at the NIXL
handshake as vLLM's compatibility check does (vllm PR #29503), and the rollout is refused with the
blue-green recommendation, nothing changed, or switched to all-at-once per role with capacity checked.
llm-d's own advice (docs/operations/disaggregation/vllm.md "Rollouts"): the EPP pairs any P with any D
in an InferencePool, so upgrade through a new pool."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from lwsflow.cli import main
from lwsflow.components.pd_probe import PROBE_LABEL, Direction, directions, pd_probe, probe_handoffs
from lwsflow.components.smoke.model import Endpoint
from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import OperationFailed
from lwsflow.controller.kube.resources import DS, LWS, POD
from lwsflow.controller.pd.compat import ALL_AT_ONCE
from lwsflow.controller.rollout import gate, session, state
from lwsflow.controller.rollout.engine import RolloutOptions
from lwsflow.sim.engine import start_engine
from reliability.ports import ReservedPort
from reliability.rollout_env import (
    LAYOUTS,
    NEW_LAYOUT,
    NS,
    OLD,
    SAME_LAYOUT,
    Env,
    ds_manifest,
    lws_manifest,
    make_env,
)

_RESERVED = ReservedPort()  # held while the test process runs: the module's engines serve on it
PORT = _RESERVED.port


# -- the probe against engines, no cluster ---------------------------------------------------------------

def test_the_reserved_port_is_the_engines_alone() -> None:
    """The engines of every pod serve on PORT at their pod IPs while no other socket may take it
    (reliability/ports.py)."""
    with start_engine(host="127.201.0.1", port=PORT, model="m") as a, \
            start_engine(host="127.201.0.2", port=PORT, model="m") as b:
        assert (a.port, b.port) == (PORT, PORT)
        for host in ("127.201.0.3", "0.0.0.0"):
            with socket.socket() as other, pytest.raises(OSError, match="Address already in use"):
                other.bind((host, PORT))


def _ep(url: str, role: str, what: str) -> Endpoint:
    return Endpoint(target=f"{what} {role}", url=url, role=role, model="m")  # type: ignore[arg-type]


def test_probe_passes_both_ways_when_layouts_match() -> None:
    with start_engine(model="m", role="prefill") as op, start_engine(model="m", role="decode") as od, \
            start_engine(model="m", role="prefill") as np_, start_engine(model="m", role="decode") as nd:
        res = probe_handoffs(directions({"prefill": _ep(np_.url, "prefill", "new"),
                                         "decode": _ep(nd.url, "decode", "new")},
                                        {"prefill": _ep(op.url, "prefill", "old"),
                                         "decode": _ep(od.url, "decode", "old")}))
    assert res.ok and res.failed == [], res.detail
    assert {c["direction"] for c in res.checks} == {"new prefill -> old decode", "old prefill -> new decode",
                                                    "new prefill -> new decode"}


def test_probe_fails_naming_each_incompatible_direction() -> None:
    with start_engine(model="m", role="prefill") as op, start_engine(model="m", role="decode") as od, \
            start_engine(model="m", role="prefill", kv_layout="2") as np_, \
            start_engine(model="m", role="decode", kv_layout="2") as nd:
        res = probe_handoffs(directions({"prefill": _ep(np_.url, "prefill", "new"),
                                         "decode": _ep(nd.url, "decode", "new")},
                                        {"prefill": _ep(op.url, "prefill", "old"),
                                         "decode": _ep(od.url, "decode", "old")}))
        only_prefill = probe_handoffs([Direction("new prefill -> old decode", _ep(np_.url, "prefill", "new"),
                                                 _ep(od.url, "decode", "old"))])
    assert not res.ok and res.failed == ["new prefill -> old decode", "old prefill -> new decode"]
    assert "NIXL compatibility hash mismatch" in res.detail and "pd-decode" in res.detail
    assert "new prefill -> new decode" not in res.failed  # the control: the release itself hands off
    assert only_prefill.failed == ["new prefill -> old decode"]


# -- on the embedded cluster ------------------------------------------------------------------------------

@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from _env(tmp_path)


@pytest.fixture
def gpu_env(tmp_path: Path) -> Iterator[Env]:
    yield from _env(tmp_path, gpu_nodes=5)


def _env(tmp: Path, gpu_nodes: int = 0) -> Iterator[Env]:
    e = make_env(tmp, gpu_nodes=gpu_nodes, images=LAYOUTS)
    try:
        yield e
    finally:
        e.close()


def _serving(manifest: dict, role: str, image: str) -> dict:
    """A role's LWS whose leader pods run a stand-in engine of ``role`` serving model ``chat``."""
    tmpl = manifest["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    tmpl["metadata"]["labels"] = {L.ROLE: role, L.MODEL: "chat"}
    tmpl["metadata"]["annotations"][L.SERVING_PORT] = str(PORT)
    tmpl["spec"]["containers"][0]["image"] = image
    return manifest


def _pair(env: Env, prefill: int = 2, decode: int = 1, gpus: int = 0) -> dict[str, dict]:
    out = {}
    for role, n in (("prefill", prefill), ("decode", decode)):
        m = _serving(lws_manifest(f"chat-{role}", replicas=n, size=1, load_s=15, gpus=gpus,
                                  labels={L.PD_PAIR: "chat", L.ROLE: role}), role, OLD)
        env.create_ready(m)
        out[role] = m
    return out


def _release(env: Env, objs: list[dict], image: str) -> Path:
    import copy

    docs = []
    for o in objs:
        d = copy.deepcopy(o)
        specs = [r["spec"] for r in d["spec"]["roles"]] if "roles" in d["spec"] else [d["spec"]]
        for s in specs:
            s["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = image
        docs.append(d)
    path = env.tmp / f"release-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _image(obj: dict) -> str:
    return str(obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"])


def _no_canary_left(env: Env) -> None:
    names = [o["metadata"]["name"] for o in env.kube.list(LWS, NS)[0]]
    assert not [n for n in names if n.endswith(("-pdp", "-pdp-prefill", "-pdp-decode"))], names
    assert not env.kube.list(POD, NS, label_selector=f"{PROBE_LABEL}=true")[0]


def _roll(env: Env, target: str, path: Path, **opts: object) -> tuple[object, list[str]]:
    lines: list[str] = []
    kind, _, name = target.partition("/")
    o = RolloutOptions(stages="1,100%", deadline_s=600, pd_probe=pd_probe(env.kube),
                       **opts)  # type: ignore[arg-type]
    out = session.run(env.kube, env.clock(), session.Target(kind, name, NS), o, manifest=path,
                      log=lines.append)
    return out, lines


def test_pair_rollout_refused_when_layouts_differ_nothing_mixed(env: Env) -> None:
    live = _pair(env)
    before = {r: env.kube.get(LWS, NS, f"chat-{r}") for r in live}
    with pytest.raises(OperationFailed) as err:
        _roll(env, "pair/chat", _release(env, list(live.values()), NEW_LAYOUT))
    msg = str(err.value)
    assert "refused, nothing changed" in msg
    assert "new prefill -> old decode" in msg and "old prefill -> new decode" in msg
    assert "NIXL compatibility hash mismatch" in msg
    assert "--strategy blue-green" in msg and "--on-incompatible all-at-once" in msg
    for role in live:  # the partitions, templates and rollout state are untouched
        after = env.kube.get(LWS, NS, f"chat-{role}")
        assert _image(after) == OLD and gate.partition(after) == gate.partition(before[role])
        assert not state.RolloutState.from_object(after).id
        assert env.rec.partitions[f"chat-{role}"] == [gate.partition(before[role])]
    _no_canary_left(env)


def test_pair_compatible_release_passes_the_probe_and_rolls(env: Env) -> None:
    live = _pair(env)
    # a canary left behind by a probe that was killed is replaced, not a reason to fail
    leftover = _serving(lws_manifest("chat-decode-pdp", replicas=1, size=1, load_s=15,
                                     labels={PROBE_LABEL: "true"}), "decode", OLD)
    env.kube.create(LWS, NS, leftover)
    out, lines = _roll(env, "pair/chat", _release(env, list(live.values()), SAME_LAYOUT))
    assert out.result == "succeeded", out.message  # type: ignore[attr-defined]
    assert any("KV hand-off passed new prefill -> old decode, old prefill -> new decode" in line
               for line in lines), lines
    _no_canary_left(env)
    assert all(_image(env.kube.get(LWS, NS, f"chat-{r}")) == SAME_LAYOUT for r in live)


def test_gitops_pair_refused_with_the_partition_left_frozen(env: Env) -> None:
    """GitOps: Argo CD applied the new template with the partition frozen at replicas (lws-semantics
    §d: no existing group updates); the probe refuses and the partition stays frozen, no stage runs."""
    _pair(env)
    for role, n in (("prefill", 2), ("decode", 1)):
        obj = env.kube.get(LWS, NS, f"chat-{role}")
        obj["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = n
        obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = NEW_LAYOUT
        env.kube.request("PUT", LWS.path(NS, f"chat-{role}"), body=obj)
    lines: list[str] = []
    o = RolloutOptions(stages="1,100%", deadline_s=600, pd_probe=pd_probe(env.kube))
    with pytest.raises(OperationFailed, match="refused, nothing changed"):
        session.run(env.kube, env.clock(), session.Target("pair", "chat", NS), o, log=lines.append)
    for role, n in (("prefill", 2), ("decode", 1)):
        obj = env.kube.get(LWS, NS, f"chat-{role}")
        assert gate.partition(obj) == n and not state.RolloutState.from_object(obj).id
        assert env.rec.partitions[f"chat-{role}"] == [0, n]  # only the sync's freeze
        pods = [p for p in env.kube.list(POD, NS, label_selector=f"{L.NAME}=chat-{role}")[0]]
        assert len(pods) == n and all(p["spec"]["containers"][0]["image"] == OLD for p in pods)
    _no_canary_left(env)


def test_pair_switches_all_at_once_per_role_when_configured(env: Env) -> None:
    live = _pair(env)
    out, lines = _roll(env, "pair/chat", _release(env, list(live.values()), NEW_LAYOUT),
                       on_incompatible=ALL_AT_ONCE)
    assert out.result == "succeeded", out.message  # type: ignore[attr-defined]
    assert any("all-at-once" in line and "fit" in line for line in lines), lines
    for role, n in (("prefill", 2), ("decode", 1)):
        obj = env.kube.get(LWS, NS, f"chat-{role}")
        ruc = obj["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
        assert (ruc["maxSurge"], ruc["maxUnavailable"]) == (n, 0) and _image(obj) == NEW_LAYOUT
        assert env.rec.partitions[f"chat-{role}"][-2:] == [n, 0]  # frozen, then everything at once
    # both partitions were lowered before either role's stage was recorded passed
    events = sorted(e for e in env.rec.order if e[1] in ("chat-prefill", "chat-decode"))
    frozen = {n: rv for rv, n, w, v in events if w == "partition" and v > 0}
    lowered = [rv for rv, n, w, v in events if w == "partition" and v == 0 and rv > frozen[n]]
    passed = [rv for rv, n, w, v in events if w == "passed" and v == 1]
    assert len(lowered) == 2 and len(passed) == 2 and max(lowered) < min(passed), events


def test_all_at_once_refused_when_a_second_copy_does_not_fit(gpu_env: Env) -> None:
    """5 nodes x 8 GPUs, 3 groups of 8 running: the two canaries fit (16 free), a full second copy (24)
    does not, so the switch is refused with the capacity numbers and nothing changes."""
    live = _pair(gpu_env, gpus=8)
    with pytest.raises(OperationFailed) as err:
        _roll(gpu_env, "pair/chat", _release(gpu_env, list(live.values()), NEW_LAYOUT),
              on_incompatible=ALL_AT_ONCE)
    msg = str(err.value)
    assert "needs a full second copy of each role" in msg and "do NOT fit" in msg and "blue-green" in msg
    for role in live:
        obj = gpu_env.kube.get(LWS, NS, f"chat-{role}")
        assert _image(obj) == OLD and not state.RolloutState.from_object(obj).id
    _no_canary_left(gpu_env)


def test_probe_that_cannot_place_its_canaries_refuses_to_guess(gpu_env: Env) -> None:
    """All 40 GPUs busy: no canary fits, so the probe cannot run and the rollout does not start blind."""
    live = _pair(gpu_env, prefill=3, decode=2, gpus=8)
    with pytest.raises(OperationFailed) as err:
        _roll(gpu_env, "pair/chat", _release(gpu_env, list(live.values()), SAME_LAYOUT))
    msg = str(err.value)
    assert "probe could not run, so nothing was changed" in msg and "must fit next to what runs" in msg
    assert all(_image(gpu_env.kube.get(LWS, NS, f"chat-{r}")) == OLD for r in live)
    _no_canary_left(gpu_env)


def _ds(env: Env) -> dict:
    ds = ds_manifest("pd", prefill=2, decode=1, load_s=15)
    for role in ds["spec"]["roles"]:
        tmpl = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        tmpl["metadata"]["labels"] = {L.MODEL: "chat"}
        tmpl["metadata"]["annotations"][L.SERVING_PORT] = str(PORT)
        tmpl["spec"]["containers"][0]["image"] = OLD
    env.create_ready(ds)
    return ds


def test_ds_rollout_refused_when_layouts_differ(env: Env) -> None:
    ds = _ds(env)
    with pytest.raises(OperationFailed) as err:
        _roll(env, "ds/pd", _release(env, [ds], NEW_LAYOUT))
    assert "ds/pd -n default: refused" in str(err.value) and "old prefill -> new decode" in str(err.value)
    live = env.kube.get(DS, NS, "pd")
    assert all(_image(r) == OLD for r in live["spec"]["roles"])
    assert not state.RolloutState.from_object(live).id
    _no_canary_left(env)


def test_ds_all_at_once_rolls_each_role_in_one_step(env: Env) -> None:
    ds = _ds(env)
    out, lines = _roll(env, "ds/pd", _release(env, [ds], NEW_LAYOUT), on_incompatible=ALL_AT_ONCE)
    assert out.result == "succeeded", out.message  # type: ignore[attr-defined]
    live = env.kube.get(DS, NS, "pd")
    budgets = {r["name"]: r["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
               for r in live["spec"]["roles"]}
    assert {n: (b["maxSurge"], b["maxUnavailable"]) for n, b in budgets.items()} == {"prefill": (2, 0),
                                                                                     "decode": (1, 0)}
    assert all(_image(r) == NEW_LAYOUT for r in live["spec"]["roles"])
    assert any("old prefill -> new decode" in line and "all-at-once" in line for line in lines), lines
    _no_canary_left(env)


def test_cli_validates_probe_options_before_connecting(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no-kubeconfig")
    cases = [
        (["pair/chat", "--on-incompatible", "all-at-once"], "--on-incompatible: only used with --pd-probe"),
        (["pair/chat", "--pd-probe", "--on-incompatible", "sometimes"], "must be one of refuse, all-at-once"),
        (["lws/chat", "--pd-probe"], "only for P/D targets"),
        (["ds/chat", "--pd-probe"], "the probe needs --manifest"),
    ]
    for args, text in cases:
        rc = main(["rollout", "run", *args, "--kubeconfig", missing])
        err = capsys.readouterr().err
        assert rc == 2 and text in err, (args, err)
