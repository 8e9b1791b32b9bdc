"""`lwsflow` command line: thin wrappers over library functions.

Errors: ``InvalidInput`` (and anything else the user caused) prints one line on stderr and exits 2;
``OperationFailed`` (and every other ``LwsflowError``) prints one line and exits 1; nothing prints a
traceback unless LWSFLOW_DEBUG=1.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import typer as typer_mod
from typer.main import get_command

from lwsflow.cli.app import app
from lwsflow.cli.output import one_line, print_error
from lwsflow.controller.errors import InvalidInput, LwsflowError, OperationFailed

__all__ = ["entry", "main", "one_line"]

# Each area owns one module; importing it registers its commands on `app`.
_COMMAND_MODULES = ("validate", "plan", "gitops", "rollout", "smoke", "pipeline", "controller", "analysis",
                    "report", "dashboard")
# The commands that rehearse the product on the embedded or the reference cluster: they live in
# lwsflow.rehearsal, which the controller image does not ship (docs/architecture.md).
REHEARSAL_COMMANDS = ("demo", "engine-stub", "sim", "refcluster")
_FULL_INSTALL = ("needs the full install (a clone of the repository, `make setup`): the embedded and "
                 "reference clusters are not part of this one")
_registered = False
# The click command typer builds from `app` (~0.2 s of signature inspection), built once per set of
# registered commands: tests call main() hundreds of times in one process.
_built: tuple[tuple[int, int], Any] | None = None


def _register() -> None:
    global _registered
    if _registered:  # main() runs more than once in one process (tests)
        return
    for name in _COMMAND_MODULES:
        importlib.import_module(f"lwsflow.cli.{name}")
    try:
        import lwsflow.rehearsal.cli  # noqa: F401  (registers REHEARSAL_COMMANDS)
    except ModuleNotFoundError as exc:
        if exc.name != "lwsflow.rehearsal":
            raise
        for command in REHEARSAL_COMMANDS:
            _absent(command)
    _registered = True


def _absent(command: str) -> None:
    """``lwsflow COMMAND ...`` where lwsflow.rehearsal is not installed: one line, exit 1."""

    @app.command(command, help=f"(Not installed here: {_FULL_INSTALL}.)", add_help_option=False,
                 context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def _needs_full_install() -> None:
        raise OperationFailed(f"lwsflow {command} {_FULL_INSTALL}")


def _command() -> Any:
    """`app` as a click command (what ``app(...)`` would build on every call)."""
    global _built
    key = (len(app.registered_commands), len(app.registered_groups))
    if _built is None or _built[0] != key:
        _built = (key, get_command(app))
    return _built[1]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `lwsflow` console script; returns the exit code."""
    _register()
    try:
        rv = _command()(args=argv, standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    except InvalidInput as exc:
        return _fail(exc, 2)
    except LwsflowError as exc:  # OperationFailed, ApiError and the rest: the operation failed
        return _fail(exc, 1)
    except KeyboardInterrupt:
        print("lwsflow: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # click usage errors and the unexpected alike: one line, never a traceback
        from typer._click import exceptions as click_exc

        if isinstance(exc, click_exc.NoArgsIsHelpError):
            exc.show()
            return 0
        if isinstance(exc, typer_mod.Abort):
            return 1
        if isinstance(exc, typer_mod.Exit):
            return int(exc.exit_code)
        if isinstance(exc, click_exc.ClickException):
            print_error(exc.format_message())
            return 2
        if os.environ.get("LWSFLOW_DEBUG"):
            raise
        print_error(f"internal: {type(exc).__name__}: {exc}")
        return 1
    return rv if isinstance(rv, int) else 0


def _fail(exc: Exception, code: int) -> int:
    if os.environ.get("LWSFLOW_DEBUG"):
        import traceback

        traceback.print_exc()
    print_error(str(exc))
    return code


def entry() -> None:
    sys.exit(main())
