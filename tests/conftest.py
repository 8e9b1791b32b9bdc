"""Suite-wide setup: the upstream reference material (pinned Go modules, ``controller/api/paths.py``)
is fetched into the cache before the tests start, with a progress line, when it is not there yet.

Without a Go toolchain it cannot be fetched: the run then says so once, and carries on past the
collection errors of the test files that read it, so everything that needs no upstream material
still runs (and those files fail, naming what is missing)."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Callable
from typing import NoReturn

import pytest

from lwsflow.controller.api import paths
from tests import levels


def pytest_configure(config: pytest.Config) -> None:
    try:
        paths.fetch_all()
    except paths.UpstreamMissing as exc:
        config.option.continue_on_collection_errors = True
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"{exc}; the tests that read upstream material fail"), stacklevel=2)


# -- test levels: the folder names them (tests/levels.py) -------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its level and start the longest levels first."""
    try:
        found = {item: levels.level_of(item.path) for item in items}
    except levels.Misplaced as exc:
        raise pytest.UsageError(str(exc)) from None
    for item, level in found.items():
        item.add_marker(level)
    items.sort(key=lambda item: levels.START[found[item]])


def _refuse(what: str) -> Callable[..., NoReturn]:
    def refuse(*_args: object, **_kwargs: object) -> NoReturn:
        raise AssertionError(f"a unit test {what}: it belongs in integration/ (docs/conventions.md, "
                             "Test levels)")
    return refuse


@pytest.fixture(autouse=True)
def _unit_stays_in_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test that reaches for the network, a process or a thread fails, naming which."""
    if request.node.get_closest_marker("unit") is None:
        return
    for name in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, name, _refuse("opens a network socket"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("starts a process"))
    monkeypatch.setattr(threading.Thread, "start", _refuse("starts a thread"))
