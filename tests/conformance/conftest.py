"""Conformance tier: the same scenario on the reference cluster and on the embedded cluster.

Run by ``make conformance`` (which builds the reference cluster first); ``make test`` never collects
these tests (they need the Go-built binaries), so this file hides them unless LWSFLOW_CONFORMANCE=1.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "api"))  # the suite's held-invalid manifests

if not os.environ.get("LWSFLOW_CONFORMANCE"):
    collect_ignore_glob = ["test_*.py"]

import clusters
from clusters import Target

REPO = Path(__file__).resolve().parents[2]
NEVER_READY = ("*never-ready*",)
READY_DELAY_S = 1.0


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The reference cluster with the embedded cluster's default pools as nodes."""
    from lwsflow.rehearsal.refcluster import launcher

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
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example catalog rendered fresh (``lwsflow render``): overlays/dev, staging, prod."""
    out = tmp_path_factory.mktemp("render") / "overlays"
    lwsflow = Path(sys.executable).with_name("lwsflow")
    subprocess.run([str(lwsflow), "render", str(REPO / "examples" / "catalog.yaml"), "--out", str(out)],
                   check=True, capture_output=True, timeout=120)
    return out


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


@pytest.fixture(autouse=True)
def _record_allowlist(request: pytest.FixtureRequest) -> Iterator[None]:
    """Lets clusters.allowed() note the allow-list entries a test used on the test's report."""
    clusters.RECORDER[:] = [lambda name, value: request.node.user_properties.append((name, value))]
    yield
    clusters.RECORDER.clear()


# -- the run's results, for bench/conformance_figures.py ----------------------------------------------
REPORT_DIR = Path(os.environ.get("LWSFLOW_CONFORMANCE_REPORT", REPO / "build" / "conformance"))
_RESULTS: dict[str, dict[str, object]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each conformance test's outcome (failed in any phase wins) and the allow-list entries it used."""
    if "tests/conformance/" not in report.nodeid.replace("\\", "/"):
        return
    r = _RESULTS.setdefault(report.nodeid, {"outcome": "passed", "properties": []})
    if report.failed:
        r["outcome"] = "failed" if report.when == "call" else "error"
    elif report.skipped and r["outcome"] == "passed":
        r["outcome"] = "skipped"
    elif report.when == "call" and not report.passed:
        r["outcome"] = report.outcome
    if report.when == "teardown":
        r["properties"] = [list(p) for p in report.user_properties]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """``results.json``: what this run (``make conformance``, or the files given) found."""
    if not _RESULTS:
        return
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    (REPORT_DIR / "results.json").write_text(json.dumps(
        {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "tests": _RESULTS}, indent=1))
