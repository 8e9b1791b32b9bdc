"""Helpers for the in-cluster controller tests: a Controller on its own thread, GitOps-style syncs."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.kube.resources import LWS, ROLLOUT_POLICY
from lwsflow.controller.rollout import gate
from reliability.rollout_env import NS, Env


def policy(name: str, target: str, stages: list[dict[str, Any]], **spec: Any) -> dict:
    return {"apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"targetRef": {"kind": "LeaderWorkerSet", "name": target}, "stages": stages,
                     "progressDeadline": "10m", **spec}}


def sync(env: Env, name: str, image: str, **ann: str) -> dict:
    """What Argo CD does with a new overlay: the new template, the partition frozen at replicas."""
    obj = env.kube.get(LWS, NS, name)
    spec = copy.deepcopy(obj["spec"])
    tmpl = spec["leaderWorkerTemplate"]["workerTemplate"]
    tmpl["spec"]["containers"][0]["image"] = image
    tmpl["metadata"].setdefault("annotations", {}).update(ann)
    return env.kube.merge_patch(LWS, NS, name, {"spec": {
        "leaderWorkerTemplate": spec["leaderWorkerTemplate"],
        "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": gate.replicas(obj)}}}})


def wait_policy(env: Env, name: str, pred: Callable[[dict], bool], timeout: float = 60.0) -> dict:
    end = time.monotonic() + timeout
    p: dict = {}
    while time.monotonic() < end:
        p = env.kube.get(ROLLOUT_POLICY, NS, name)
        if pred(p.get("status") or {}):
            return p
        time.sleep(0.05)
    raise AssertionError(f"policy {name}: condition not reached; status {p.get('status')}")


@contextmanager
def running(ctl: Controller) -> Iterator[Controller]:
    t = threading.Thread(target=ctl.run, daemon=True)
    t.start()
    try:
        yield ctl
    finally:
        ctl.stop.set()
        t.join(timeout=10)
