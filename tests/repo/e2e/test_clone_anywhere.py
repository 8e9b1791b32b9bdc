"""A clone anywhere (issue 24): the repository in an empty temporary folder needs nothing beside it.

The clone's parent is a fresh folder, so ``../shared`` cannot exist there; its upstream cache is a
fresh folder too (``LWSFLOW_CACHE``), so ``scripts/setup`` in the clone must fetch every pinned module
through Go and the checksum pins. Then a subset of the suite that reads every kind of upstream
material (LWS CRDs and examples, the Gateway API and InferencePool CRDs, the Argo schema) runs in the
clone with the clone's own code. The reference cluster's ``up``/``down`` from a clone runs in the
conformance tier (``tests/conformance/test_clone_refcluster.py``), where its binaries are built.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from reliability import fresh_clone

# One test file per kind of upstream material, each quick.
SUBSET = [
    "tests/api/integration/test_api_paths.py",  # the cache, the pins, a tampered pin refused
    "tests/api/integration/test_api_crd_pack.py",  # LWS CRDs (v0.9.0), Gateway API + InferencePool CRDs
    "tests/api/integration/test_api_cli_validate.py",  # LWS config/samples and docs/examples
    "tests/pipelines/unit/test_compile.py",  # the Argo Workflows schema
    "tests/apiserver/integration/test_apiserver_http.py",  # an LWS sample through the embedded API server
]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """(the clone, its environment) after ``scripts/setup`` ran there with an empty upstream cache."""
    parent = tmp_path_factory.mktemp("anywhere") / "empty"
    repo = fresh_clone.clone(parent)
    assert fresh_clone.ROOT not in repo.parents and not (repo.parent / "shared").exists()
    fresh_clone.seed_venv(repo)
    env = fresh_clone.clean_env(LWSFLOW_CACHE=str(parent.parent / "cache"))
    setup = fresh_clone.run(["bash", "scripts/setup"], repo, env, 900)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    # every pinned module was fetched into the fresh cache, with a progress line each
    pinned = re.findall(r"^\t(\S+) (v\S+)$", (repo / "scripts" / "upstream" / "go.mod").read_text(), re.M)
    assert len(pinned) >= 7
    for module, version in pinned:
        assert f"lwsflow: fetching {module}@{version} " in setup.stderr, (module, setup.stderr)
    assert setup.stderr.count("lwsflow: fetching ") == len(pinned), setup.stderr
    yield repo, env


def test_no_file_reads_a_folder_beside_the_repository(clone: tuple[Path, dict[str, str]]) -> None:
    repo, env = clone
    pattern = "|".join(["LWSFLOW_" + "SHARED", r"\.\./" + "shared/reference", "shared_" + "dir"])
    found = fresh_clone.run(["git", "grep", "-nE", pattern], repo, env, 60)
    assert found.returncode == 1 and found.stdout == "", found.stdout


def test_the_subset_passes_in_the_clone(clone: tuple[Path, dict[str, str]]) -> None:
    repo, env = clone
    proc = fresh_clone.run([repo / ".venv" / "bin" / "python", "-m", "pytest", "-q", "-p", "no:xdist",
                            "-p", "no:cacheprovider", *SUBSET], repo, env, 900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "error" not in proc.stdout.lower().split(" passed")[-1]
    # the clone's own code ran, not this checkout's
    where = fresh_clone.run([repo / ".venv" / "bin" / "python", "-c",
                             "import lwsflow.controller.api.paths as p; print(p.repo_root())"], repo, env, 60)
    assert where.stdout.strip() == str(repo), where.stdout + where.stderr
