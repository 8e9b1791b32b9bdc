"""Present a SmokeReport: a rich table for people, JSON for machines, written atomically to a file."""

from __future__ import annotations

from pathlib import Path

from lwsflow.components.atomic import write_file_atomic
from lwsflow.components.smoke.model import SmokeReport


def render_table(report: SmokeReport, width: int | None = None) -> str:
    """The report as a rich table (plain text when not on a terminal)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="lwsflow smoke", show_lines=False)
    for col in ("check", "target", "result", "time", "detail"):
        table.add_column(col, overflow="fold")
    for c in report.checks:
        status = "[yellow]skip[/]" if c.skipped else ("[green]pass[/]" if c.passed else "[red]FAIL[/]")
        detail = c.detail
        if not c.passed and not c.skipped and c.expected is not None:
            detail += f" (expected {c.expected}, got {c.got})"
        table.add_row(c.name, c.target, status, f"{c.duration_s * 1000:.0f} ms", detail)
    console = Console(width=width or 160, record=True, force_terminal=False)
    with console.capture() as cap:
        console.print(table)
        failed = report.failed()
        console.print(f"{'PASSED' if report.passed else 'FAILED'}: {len(report.checks)} checks, "
                      f"{len(failed)} failed, {report.duration_s:.2f}s")
    return cap.get()


def write_report(report: SmokeReport, path: str | Path) -> Path:
    """Write the JSON report atomically (temp file + rename)."""
    path = Path(path)
    write_file_atomic(path, (report.to_json() + "\n").encode())
    return path
