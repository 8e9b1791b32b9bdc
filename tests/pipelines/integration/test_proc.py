"""Bounded tool runs: output captured, exit status left to the caller, a hung tool is one-line error."""

from __future__ import annotations

import sys

import pytest

from lwsflow.components.proc import run_bounded
from lwsflow.controller.errors import OperationFailed


def test_output_is_captured_and_a_failure_is_returned_not_raised() -> None:
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    proc = run_bounded([sys.executable, "-c", code], what="probe", timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out\n", "err\n")


def test_a_run_past_its_deadline_is_operation_failed_naming_it() -> None:
    with pytest.raises(OperationFailed, match=r"^sleepy tool did not finish within 0s$"):
        run_bounded([sys.executable, "-c", "import time; time.sleep(30)"], what="sleepy tool", timeout=0.2)
