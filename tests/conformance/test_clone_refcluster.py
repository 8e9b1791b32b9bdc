"""A clone anywhere (issue 24), the reference cluster's part: in a fresh clone whose parent is an
empty folder and whose upstream cache is empty (only the built binaries are lent: building them takes
~25 minutes), ``scripts/setup`` fetches the pinned modules and ``lwsflow refcluster up`` installs the
LWS CRDs from them, starts, and ``down`` stops it. The rest of the clone check is in ``make test``
(tests/repo/e2e/test_clone_anywhere.py)."""

from __future__ import annotations

import json
from pathlib import Path

from lwsflow.rehearsal.refcluster import binaries
from reliability import fresh_clone


def test_refcluster_up_and_down_from_a_fresh_clone(tmp_path: Path) -> None:
    parent = tmp_path / "empty"
    repo = fresh_clone.clone(parent)
    assert not (repo.parent / "shared").exists()
    fresh_clone.seed_venv(repo)
    cache = tmp_path / "cache"
    (cache / "refcluster").mkdir(parents=True)
    (cache / "refcluster" / binaries.version()).symlink_to(binaries.cache_dir())
    env = fresh_clone.clean_env(LWSFLOW_CACHE=str(cache))
    setup = fresh_clone.run(["bash", "scripts/setup"], repo, env, 900)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    lwsflow, state = repo / ".venv" / "bin" / "lwsflow", tmp_path / "state"
    up = fresh_clone.run([lwsflow, "refcluster", "up", "--state-dir", state], repo, env, 400)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        kubeconfig = up.stdout.strip().splitlines()[-1]
        got = fresh_clone.run([repo / ".venv" / "bin" / "kubectl", "--kubeconfig", kubeconfig, "get", "crd",
                               "-o", "json"], repo, env, 60)
        assert got.returncode == 0, got.stderr
        names = sorted(c["metadata"]["name"] for c in json.loads(got.stdout)["items"])
        # sigs.k8s.io/lws v0.9.0's CRDs, from the clone's fresh cache (no RoleScaler: that is v0.10+)
        assert names == ["disaggregatedsets.disaggregatedset.x-k8s.io",
                         "leaderworkersets.leaderworkerset.x-k8s.io"], names
    finally:
        down = fresh_clone.run([lwsflow, "refcluster", "down", "--state-dir", state], repo, env, 120)
    assert down.returncode == 0 and "stopped: " in down.stdout, down.stdout + down.stderr
    assert not state.exists()
