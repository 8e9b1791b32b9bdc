"""The one error format of every command: ``error: [FILE: ][field: ]message`` on stderr, one line.

``main`` prints raised errors with :func:`print_error`; commands that report several problems and
go on (``validate``) print each with it too; warnings are ``warning: ...`` lines. :func:`about_file`
adds the input file to an ``InvalidInput`` that does not name one yet, so every command that reads
a file says which.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lwsflow.controller.errors import InvalidInput


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped: user values inside an error
    message (a name with a newline, a form feed, U+2028) must not split the one error line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def print_error(text: str) -> None:
    print(f"error: {one_line(text)}", file=sys.stderr)


def print_warning(text: str) -> None:
    """A problem that does not stop the command, in the same one-line form as errors."""
    print(f"warning: {one_line(text)}", file=sys.stderr)


def warn_about_catalog(catalog: Any, path: str | Path) -> None:
    """The catalog's non-fatal findings (a model id that looks like the other kind of checkpoint)."""
    for spec in catalog.models:
        for text in spec.checkpoint_warnings():
            print_warning(f"{path}: models[{spec.name}].model: {text}")


@contextmanager
def about_file(path: str | Path) -> Iterator[None]:
    """Bad input found while working on ``path`` names it: ``FILE: field: message``."""
    try:
        yield
    except InvalidInput as exc:
        if exc.source:
            raise
        raise InvalidInput(exc.message, field=exc.field, source=str(path)) from None
