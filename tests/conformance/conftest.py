"""Conformance tier: the same scenario on the reference cluster and on the embedded cluster.

Run by ``make conformance`` (which builds the reference cluster first); ``make test`` never collects
these tests (they need the Go-built binaries), so this file hides them unless LWSFLOW_CONFORMANCE=1.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "api"))  # the suite's held-invalid manifests

if not os.environ.get("LWSFLOW_CONFORMANCE"):
    collect_ignore_glob = ["test_*.py"]

from clusters import Target

NEVER_READY = ("*never-ready*",)
READY_DELAY_S = 1.0


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The reference cluster with the embedded cluster's default pools as nodes."""
    from lwsflow.pipelines.refcluster import launcher

    state = tmp_path_factory.mktemp("refcluster") / "state"
    t0 = time.monotonic()
    kubeconfig = launcher.up(launcher.UpOptions(state_dir=state, ready_delay_s=READY_DELAY_S,
                                                never_ready=NEVER_READY))
    print(f"\nreference cluster up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    try:
        yield Target("reference", kubeconfig, state / "kcache")
    finally:
        launcher.down(state)


@pytest.fixture(scope="session")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The embedded cluster (default pools) behind its HTTPS API, in real time at the default speed."""
    from lwsflow.sim.apiserver import ApiServer
    from lwsflow.sim.cluster import DEFAULT_SPEED, Cluster
    from lwsflow.sim.config import ClusterConfig

    cfg = ClusterConfig.default().model_copy(update={"never_ready_images": list(NEVER_READY)})
    cluster = Cluster(cfg, now0=time.time())
    api = ApiServer(cluster.store, token=secrets.token_urlsafe(24), clock=cluster.now, speed=DEFAULT_SPEED)
    api.start()
    d = tmp_path_factory.mktemp("embedded")
    kubeconfig = api.write_kubeconfig(d / "kubeconfig")
    cluster.start_realtime(DEFAULT_SPEED)
    try:
        yield Target("embedded", kubeconfig, d / "kcache")
    finally:
        cluster.stop()
        api.stop()
