"""The rehearsal commands: importing this package registers them on the one ``lwsflow`` app.

``lwsflow.cli`` imports it lazily; where it is absent (the controller image) the CLI puts a
one-line "needs the full install" in place of each name in ``REHEARSAL_COMMANDS`` there, which
tests/pipelines/integration/test_rehearsal_cli.py keeps equal to what this package registers.
"""

from __future__ import annotations

import importlib

for _name in ("demo", "engine_stub", "sim", "refcluster"):
    importlib.import_module(f"lwsflow.rehearsal.cli.{_name}")
