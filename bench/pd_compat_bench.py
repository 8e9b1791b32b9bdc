"""What mixing incompatible P/D revisions costs, and what the cross-revision probe saves.

Run: ``.venv/bin/python bench/pd_compat_bench.py [--seed 1]``. On the embedded cluster (stand-in
engines, a new release whose KV layout differs), a client hands KV off the way llm-d's router does it,
any Ready prefill pod with any Ready decode pod, while the pair is rolled out three ways:

- ``staged`` (1,50%,100% without the probe): every cross-revision hand-off fails at the NIXL handshake
  for as long as the rollout lasts;
- ``--pd-probe`` (refuse): the probe's canaries find the mismatch first; nothing rolls, nothing fails;
- ``--pd-probe --on-incompatible all-at-once``: failures only while both revisions serve during the
  switch.

Prints, per mode, the hand-offs tried and failed and the cluster minutes from the first to the last
failure. Times are cluster time at the bench's speed; the counts depend on the client's pace.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import yaml  # noqa: E402

from lwsflow.components.pd_probe import pd_probe  # noqa: E402
from lwsflow.controller.api import labels as L  # noqa: E402
from lwsflow.controller.errors import OperationFailed  # noqa: E402
from lwsflow.controller.kube.client import Kube  # noqa: E402
from lwsflow.controller.kube.resources import LWS, POD  # noqa: E402
from lwsflow.controller.pd.compat import ALL_AT_ONCE, REFUSE  # noqa: E402
from lwsflow.controller.rollout import gate, session  # noqa: E402
from lwsflow.controller.rollout.engine import RolloutOptions  # noqa: E402
from lwsflow.sim.config import ImageProfile  # noqa: E402
from lwsflow.sim.testing import EmbeddedCluster  # noqa: E402
from reliability.rollout_env import NS, config, lws_manifest  # noqa: E402

OLD = "r.example/vllm@sha256:" + "1" * 64
NEW_DIGEST = "sha256:" + "2" * 64
NEW = f"r.example/vllm@{NEW_DIGEST}"
SPEED = 20.0
PORT = 31_234
PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
          "remote_block_ids": None, "remote_host": None, "remote_port": None}


def _lws(role: str, replicas: int, image: str) -> dict:
    m = lws_manifest(f"chat-{role}", replicas=replicas, size=1, load_s=60,
                     labels={L.PD_PAIR: "chat", L.ROLE: role})
    tmpl = m["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    tmpl["metadata"]["labels"] = {L.ROLE: role, L.MODEL: "chat"}
    tmpl["metadata"]["annotations"][L.SERVING_PORT] = str(PORT)
    tmpl["spec"]["containers"][0]["image"] = image
    return m


class Traffic:
    """Hand-offs between random Ready prefill and decode leaders until stopped (the EPP pairs any)."""

    def __init__(self, kube: Kube, now: object, seed: int) -> None:
        self.kube, self.now, self.rng = kube, now, random.Random(seed)
        self.tried = self.failed = 0
        self.fail_times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _leaders(self, role: str) -> list[str]:
        selector = f"{L.ROLE}={role},{L.WORKER_INDEX}=0,{L.MODEL}=chat"  # not the probe's canaries
        pods, _ = self.kube.list(POD, NS, label_selector=selector)
        return [f"http://{p['status']['podIP']}:{PORT}" for p in pods
                if gate.pod_ready(p) and p["status"].get("podIP")
                and not p["metadata"].get("deletionTimestamp")]

    def _run(self) -> None:
        seen = 0.0
        pre: list[str] = []
        dec: list[str] = []
        with httpx.Client(timeout=5) as c:
            while not self._stop.wait(0.005):
                if time.monotonic() - seen > 0.25:  # the endpoints, as a router's informer would see them
                    pre, dec, seen = self._leaders("prefill"), self._leaders("decode"), time.monotonic()
                if not pre or not dec:
                    continue
                body = {"model": "chat", "prompt": "a prompt long enough " * 8, "max_tokens": 1}
                try:
                    r1 = c.post(f"{self.rng.choice(pre)}/v1/completions",
                                json={**body, "kv_transfer_params": PARAMS})
                    params = r1.json().get("kv_transfer_params")
                    r2 = c.post(f"{self.rng.choice(dec)}/v1/completions",
                                json={**body, "max_tokens": 2, "kv_transfer_params": params})
                    ok = r1.status_code == 200 and r2.status_code == 200
                except (httpx.HTTPError, ValueError):
                    ok = False  # a pod going away mid-request
                self.tried += 1
                if not ok:
                    self.failed += 1
                    self.fail_times.append(self.now())  # type: ignore[operator]

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def run(mode: str, seed: int) -> str:
    cfg = config()
    cfg.images[NEW_DIGEST] = ImageProfile(kv_layout="2")
    with tempfile.TemporaryDirectory() as tmp:
        sim = EmbeddedCluster(tmp, cfg, speed=SPEED, engines=True, engine_options={"side_channel_port": 0})
        sim.start()
        kube = Kube.connect(str(sim.kubeconfig))
        try:
            for role, n in (("prefill", 4), ("decode", 2)):
                kube.create(LWS, NS, _lws(role, n, OLD))
            end = time.monotonic() + 60
            while not all(gate.lws_fully_rolled(kube.get(LWS, NS, f"chat-{r}")).passed
                          for r in ("prefill", "decode")):
                assert time.monotonic() < end, "the pair never became ready"
                time.sleep(0.1)
            path = Path(tmp) / "new.yaml"
            path.write_text(yaml.safe_dump_all([_lws("prefill", 4, NEW), _lws("decode", 2, NEW)]))
            clock = session.clock_for(kube)
            opts = RolloutOptions(stages="1,50%,100%", deadline_s=1800)
            if mode != "staged":
                opts.pd_probe = pd_probe(kube)
                opts.on_incompatible = ALL_AT_ONCE if mode == "all-at-once" else REFUSE
            t0 = clock.now()
            with Traffic(kube, clock.now, seed) as traffic:
                time.sleep(1.0)  # some traffic on the old revision alone first
                try:
                    out = session.run(kube, clock, session.Target("pair", "chat", NS), opts, manifest=path)
                    result = out.result
                except OperationFailed:
                    result = "refused"
                time.sleep(1.0)
            span = (max(traffic.fail_times) - min(traffic.fail_times)) / 60 if traffic.fail_times else 0.0
            share = 100 * traffic.failed / max(1, traffic.tried)
            return (f"{mode:12} {result:10} rollout {(clock.now() - t0) / 60:5.1f} cluster-min; hand-offs "
                    f"{traffic.failed}/{traffic.tried} failed ({share:.0f}%), failing for {span:.1f} "
                    "cluster-min")
        finally:
            kube.api.close()
            sim.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"pair 4 prefill + 2 decode, model load 60 s, new release with another KV layout, speed {SPEED:g}x")
    for mode in ("staged", "refuse", "all-at-once"):
        print(run(mode, args.seed), flush=True)


if __name__ == "__main__":
    main()
