"""Benchmark: an in-process rolling update of 500 groups x size 2 on 1,000 nodes of 8 GPUs.

Prints wall time, virtual time, reconciles, timers and store writes (events) per wall second.
Run: ``.venv/bin/python bench/sim_rollout.py [--groups 500] [--max-unavailable 10%] [--max-surge 10%]``.
"""

from __future__ import annotations

import argparse
import time

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ClusterConfig, PoolConfig, Timings
from lwsflow.sim.lws_controller import LWS


def lws(name: str, groups: int, image: str, max_unavailable: str, max_surge: str, gpus: int = 4) -> dict:
    tpl = {"spec": {"containers": [{"name": "engine", "image": image,
                                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": groups, "leaderWorkerTemplate": {"size": 2, "workerTemplate": tpl},
                     "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                         "maxUnavailable": max_unavailable, "maxSurge": max_surge}}}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--groups", type=int, default=500)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--max-unavailable", default="10%")
    ap.add_argument("--max-surge", default="10%")
    ap.add_argument("--gpus-per-pod", type=int, default=4)
    args = ap.parse_args()
    cfg = ClusterConfig(pools=[PoolConfig(name="h100", count=args.nodes, gpus_per_node=8,
                                          gpu_product="NVIDIA-H100-80GB-HBM3")], timings=Timings(),
                        max_unavailable_statefulset=True)  # --max-unavailable needs the StatefulSet gate on
    c = Cluster(cfg)

    def done(c: Cluster) -> bool:
        o = c.store.get_raw(LWS, "default", "bench")
        st = o.get("status") or {}
        return (st.get("observedGeneration") == o["metadata"]["generation"]
                and st.get("readyReplicas") == st.get("updatedReplicas") == st.get("replicas") == args.groups
                and any(x["type"] == "Available" and x["status"] == "True"
                        for x in st.get("conditions") or ()))

    t0 = time.perf_counter()
    c.store.create(LWS, lws("bench", args.groups, "vllm:v1", args.max_unavailable, args.max_surge,
                                args.gpus_per_pod))
    c.run_until(done, 30 * 24 * 3600)
    t1 = time.perf_counter()
    rv0, rec0, fired0, v0 = c.store.resource_version, c.reconciles, c.clock.fired, c.now()

    def bump(o: dict) -> None:
        o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "vllm:v2"
    c.store.mutate(LWS, "default", "bench", bump)
    c.run_until(done, 30 * 24 * 3600)
    t2 = time.perf_counter()
    writes = c.store.resource_version - rv0
    print(f"create {args.groups} groups: {t1 - t0:.2f}s wall")
    print(f"rollout {args.groups} groups x 2 on {args.nodes} nodes (maxUnavailable {args.max_unavailable}, "
          f"maxSurge {args.max_surge}): {t2 - t1:.2f}s wall, {c.now() - v0:.0f}s virtual, "
          f"{writes} store events ({writes / (t2 - t1):.0f}/s), {c.reconciles - rec0} reconciles, "
          f"{c.clock.fired - fired0} timers")


if __name__ == "__main__":
    main()
