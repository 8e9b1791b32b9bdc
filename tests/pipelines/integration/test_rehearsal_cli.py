"""The rehearsal commands (demo, engine-stub, sim, refcluster) live in ``lwsflow.rehearsal``, which the
controller image does not ship: where it is installed they are the real commands, where it is not
each says in one line that it needs the full install (tests/repo/e2e/test_image_content.py runs that in the
image's own install; here the absence is made by refusing the import in a child process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import typer

import lwsflow.rehearsal.cli
from lwsflow.cli import REHEARSAL_COMMANDS, main
from lwsflow.cli.app import app


def _rehearsal_names() -> set[str]:
    """The names lwsflow.rehearsal.cli registers on the app: its commands and its sub-apps."""
    main(["--help"])  # registers every command module
    mods = [m for name, m in sys.modules.items() if name.startswith(lwsflow.rehearsal.cli.__name__)]
    sub_apps = {id(v) for m in mods for v in vars(m).values() if isinstance(v, typer.Typer)}
    return ({c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands
             if c.callback is not None and c.callback.__module__.startswith("lwsflow.rehearsal.")}
            | {g.name for g in app.registered_groups if id(g.typer_instance) in sub_apps})


def test_the_stand_ins_name_exactly_what_rehearsal_registers() -> None:
    assert _rehearsal_names() == set(REHEARSAL_COMMANDS)


def test_the_real_commands_where_rehearsal_is_installed(capsys) -> None:
    assert main(["sim", "--help"]) == 0
    assert "serve" in capsys.readouterr().out
    assert main(["engine-stub", "--role", "router", "--port", "0", "--exit-after", "0"]) == 2


_WITHOUT_REHEARSAL = textwrap.dedent("""
    import sys

    class Refuse:  # what the image's install looks like: no lwsflow.rehearsal, no lwsflow.sim
        def find_spec(self, name, path=None, target=None):
            if name in ("lwsflow.rehearsal", "lwsflow.sim"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, Refuse())
    from lwsflow.cli import REHEARSAL_COMMANDS, main

    assert main(["--help"]) == 0
    for command in REHEARSAL_COMMANDS:
        print(command, main([command, "up", "--port", "0"]), file=sys.stderr, flush=True)
    print(main(["plan", "--help"]), file=sys.stderr)
""")


def test_without_rehearsal_each_says_in_one_line_what_it_needs() -> None:
    res = subprocess.run([sys.executable, "-c", _WITHOUT_REHEARSAL], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert lines[-1] == "0", lines  # the product's commands are all there
    want = []
    for command in REHEARSAL_COMMANDS:
        want += [f"error: lwsflow {command} needs the full install (a clone of the repository, "
                 "`make setup`): the embedded and reference clusters are not part of this one",
                 f"{command} 1"]
    assert lines[:-1] == want
    for command in REHEARSAL_COMMANDS:
        assert command in res.stdout  # listed by --help, its help saying the same
