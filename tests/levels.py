"""Test levels: a test file's folder names its level (docs/conventions.md, "Test levels").

``tests/<area>/unit/``: pure, in process (no socket, no process, no thread: ``tests/conftest.py``
fails a unit test that reaches for one); ``tests/<area>/integration/``: against the embedded cluster,
its servers and tools on 127.0.0.1; ``tests/<area>/e2e/``: whole user paths (the demo, the guides,
buildah + registry + git, the wheel, a clone, a browser); ``tests/conformance/``: the reference
cluster against the embedded one (``make conformance``).
"""

from __future__ import annotations

from pathlib import Path

LEVELS = ("unit", "integration", "e2e")
TESTS = Path(__file__).resolve().parent
# the order a run starts them in: xdist hands tests out in collection order, so the longest waits
# (end-to-end) overlap each other and the unit tests fill the last minute
START = {"e2e": 0, "conformance": 1, "integration": 2, "unit": 3}


class Misplaced(ValueError):
    """A test file outside a level folder."""


def level_of(path: Path) -> str:
    parts = path.resolve().relative_to(TESTS).parts
    if parts[0] == "conformance":
        return "conformance"
    if len(parts) == 3 and parts[1] in LEVELS:
        return parts[1]
    raise Misplaced(f"{path.resolve().relative_to(TESTS.parent)}: a test file sits in "
                    f"tests/<area>/<level>/ with <level> one of {', '.join(LEVELS)} "
                    "(docs/conventions.md, Test levels)")
