"""The one typer app that every command module registers on.

Command modules (``cli/<area>.py``) import ``app`` and decorate plain functions with
``@app.command()`` (or add sub-apps with ``app.add_typer``). They import heavy libraries lazily,
inside the command body, so ``lwsflow --help`` stays fast.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="lwsflow",
    help="Render, build, promote, roll out and smoke-test LeaderWorkerSet / DisaggregatedSet inference.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.command()
def version() -> None:
    """Print the lwsflow version."""
    from importlib.metadata import version as _v

    print(_v("lwsflow"))


@app.callback()
def _root() -> None:
    """lwsflow: multi-node LLM inference on LeaderWorkerSet / DisaggregatedSet, from catalog to rollout."""
