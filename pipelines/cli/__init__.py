"""`lwsflow` command line: thin wrappers over library functions.

Errors: ``InvalidInput`` (and anything else the user caused) prints one line on stderr and exits 2;
``OperationFailed`` (and every other ``LwsflowError``) prints one line and exits 1; nothing prints a
traceback unless LWSFLOW_DEBUG=1.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer as typer_mod

from lwsflow.controller.errors import InvalidInput, LwsflowError
from lwsflow.pipelines.cli.app import app
from lwsflow.pipelines.cli.output import one_line, print_error

__all__ = ["entry", "main", "one_line"]

# Each area owns one module; importing it registers its commands on `app`.
_COMMAND_MODULES = ("validate", "plan", "gitops", "sim", "rollout", "smoke", "pipeline", "controller",
                    "refcluster", "analysis", "report", "dashboard")


def _register() -> None:
    for name in _COMMAND_MODULES:
        importlib.import_module(f"lwsflow.pipelines.cli.{name}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `lwsflow` console script; returns the exit code."""
    _register()
    try:
        rv = app(args=argv, standalone_mode=False)
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
