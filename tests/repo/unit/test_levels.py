"""The test levels hold: a unit test stays in process, and every test file sits in a level folder."""

from __future__ import annotations

import socket
import subprocess
import threading

import pytest

from tests import levels


def test_a_unit_test_that_reaches_out_fails_naming_what() -> None:
    with socket.socket() as s, pytest.raises(AssertionError, match="opens a network socket"):
        s.connect(("127.0.0.1", 9))
    with pytest.raises(AssertionError, match="starts a process"):
        subprocess.run(["true"], check=False)
    with pytest.raises(AssertionError, match="starts a thread"):
        threading.Thread(target=print).start()


def test_the_folder_names_the_level() -> None:
    assert levels.level_of(levels.TESTS / "rollout" / "unit" / "test_x.py") == "unit"
    assert levels.level_of(levels.TESTS / "docs" / "e2e" / "test_y.py") == "e2e"
    assert levels.level_of(levels.TESTS / "conformance" / "test_z.py") == "conformance"
    with pytest.raises(levels.Misplaced, match=r"tests/rollout/test_x.py: a test file sits in "
                                               r"tests/<area>/<level>/"):
        levels.level_of(levels.TESTS / "rollout" / "test_x.py")


def test_every_test_file_sits_in_a_level_folder() -> None:
    for path in levels.TESTS.rglob("test_*.py"):
        levels.level_of(path)
