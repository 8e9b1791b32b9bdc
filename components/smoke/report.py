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


SUMMARY_LIMIT = 400  # a policy's status.message holds 500: the stage and gate words need the rest


def failure_summary(report: SmokeReport, limit: int = SUMMARY_LIMIT) -> str:
    """One line for a stage hook's result: every failed check with its own words, e.g. ``smoke
    failed: placement@lws/big-405b: cannot read node gpu-0: 403 Forbidden: ...``, cut at ``limit``
    characters (the first failure first: it is usually the cause of the rest)."""
    parts = []
    for c in report.failed():
        detail = c.detail + (f" (expected {c.expected}, got {c.got})" if c.expected is not None else "")
        parts.append(f"{c.name}@{c.target}: {detail}" if detail else f"{c.name}@{c.target}")
    text = "smoke failed: " + ("; ".join(parts) or "no check ran")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def pass_summary(report: SmokeReport) -> str:
    """One line for a passed stage hook that says what was checked, e.g. ``smoke passed: 14 checks
    (chat x3, discover x2, ..., pd-prefill x2, placement x2)``: a pair whose hand-off never ran shows
    it by the missing ``pd-*`` checks."""
    ran: dict[str, int] = {}
    for c in report.checks:
        if not c.skipped:
            ran[c.name] = ran.get(c.name, 0) + 1
    names = ", ".join(f"{n} x{k}" if k > 1 else n for n, k in sorted(ran.items()))
    return f"smoke passed: {sum(ran.values())} checks ({names})"


def write_report(report: SmokeReport, path: str | Path) -> Path:
    """Write the JSON report atomically (temp file + rename)."""
    path = Path(path)
    write_file_atomic(path, (report.to_json() + "\n").encode())
    return path
