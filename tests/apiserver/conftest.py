"""Fixtures for the API server tests: a served bare Store, real kubectl, the official client."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lwsflow.sim.apiserver import ApiFaults, ApiServer
from lwsflow.sim.store import Store
from tests.apiserver.apiserver_helpers import KUBECTL, TOKEN


class Clock:
    """A settable virtual clock (epoch seconds)."""

    def __init__(self, now: float = 1_767_225_600.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> Store:
    return Store(now=clock, history=50)


@pytest.fixture
def make_server(store: Store) -> Iterator[Callable[..., ApiServer]]:
    started: list[ApiServer] = []

    def make(faults: ApiFaults | None = None, **kw: Any) -> ApiServer:
        kw.setdefault("token", TOKEN)
        srv = ApiServer(store, faults=faults, **kw)
        srv.start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture
def server(make_server: Callable[..., ApiServer]) -> ApiServer:
    return make_server()


@pytest.fixture
def kubeconfig(server: ApiServer, tmp_path: Path) -> Path:
    return server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def kubectl(kubeconfig: Path, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(
        *args: str, stdin: str | None = None, timeout: float = 30, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "kcache"), *args]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc

    return run


@pytest.fixture
def api_client(kubeconfig: Path) -> Iterator[Any]:
    from kubernetes import config

    client = config.new_client_from_config(str(kubeconfig))
    yield client
    client.close()
