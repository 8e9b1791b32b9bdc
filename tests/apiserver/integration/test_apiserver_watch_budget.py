"""``kube/watch.follow`` ends at its wall budget, not at the next whole second.

A watch's ``timeoutSeconds`` is a whole number of at least 1, so a quiet object's stream used to run
on to the next whole second: a 30 s bake at x200 (0.15 s wall) waited a full second, 200 s of
cluster time, and a rollout's every bake and deadline overshot by that much."""

from __future__ import annotations

import time
from pathlib import Path

from lwsflow.controller.kube import watch
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import SECRET


def _secret(kube: Kube, name: str) -> None:
    kube.create(SECRET, "default", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                                    "data": {"k": "dg=="}})


def test_a_quiet_watch_ends_at_its_budget_and_the_connection_serves_on(kubeconfig: Path) -> None:
    kube = Kube.connect(str(kubeconfig))
    _secret(kube, "quiet")
    start = time.monotonic()
    seen = list(watch.follow(kube, SECRET, "default", "quiet", wall_budget=0.2))
    took = time.monotonic() - start
    # before: the stream ran to the server's timeoutSeconds=1 after it opened, so >= 1 s
    assert len(seen) == 1 and 0.2 <= took < 1.0, took
    # the connection the watch timed out on is not handed out again with its short timeout
    assert kube.get(SECRET, "default", "quiet")["metadata"]["name"] == "quiet"


def test_a_change_within_the_budget_is_seen_and_the_watch_still_ends_on_time(kubeconfig: Path) -> None:
    kube = Kube.connect(str(kubeconfig))
    _secret(kube, "busy")
    start = time.monotonic()
    seen = []
    for obj in watch.follow(kube, SECRET, "default", "busy", wall_budget=0.3):
        if not seen:  # changed after the first read: the watch opens at that read's resourceVersion
            kube.merge_patch(SECRET, "default", "busy", {"metadata": {"labels": {"changed": "yes"}}})
        seen.append(obj)
    took = time.monotonic() - start
    assert [(s["metadata"].get("labels") or {}).get("changed") for s in seen] == [None, "yes"]
    assert 0.3 <= took < 1.0, took  # before: on to timeoutSeconds=1 after the stream opened
