"""A per-job Gantt picture per policy (pending and running bars, deadline marks) over GPU utilisation.

One column per policy, so schedulers compare at a glance, as in the usual scheduling papers: grey =
pending, coloured = running (one colour per job class), red hatched = work lost to preemption or
eviction, a black tick = the soft deadline (the job's label turns red when it was missed). Drawn with
matplotlib's Agg canvas directly (no pyplot global state, no display needed).
"""

from __future__ import annotations

from pathlib import Path

from lwsflow.controller.errors import InvalidInput
from lwsflow.sim.evaluator.engine import Result

MAX_JOBS = 60  # more rows than this are unreadable; the first ones by submission are drawn


def _scale(end: float) -> tuple[float, str]:
    if end <= 2 * 3600:
        return 60.0, "minutes"
    if end <= 3 * 86400:
        return 3600.0, "hours"
    return 86400.0, "days"


def plot(results: list[Result], path: Path, max_jobs: int = MAX_JOBS) -> Path:
    """Write the picture to ``path`` (PNG, SVG or PDF by suffix) and return it."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise InvalidInput(f"expected a .png, .svg or .pdf file, got {path.name!r}", field="--plot")
    end = max((r.end for r in results), default=1.0) or 1.0
    # deadlines past the last completion still get their mark
    end = max([end, *(j.deadline for r in results for j in r.jobs[:max_jobs] if j.deadline is not None)])
    end *= 1.02
    unit, unit_name = _scale(end)
    jobs0 = results[0].jobs[:max_jobs] if results else []
    classes = list(dict.fromkeys(j.group for j in jobs0))
    cmap = colormaps["tab10"]
    color = {g: cmap(i % 10) for i, g in enumerate(classes)}
    rows = max(1, len(jobs0))
    height = 2.0 + max(2.0, 0.22 * rows) + 1.4
    fig = Figure(figsize=(6.5 * len(results), height))
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, len(results), height_ratios=[max(2.0, 0.22 * rows), 1.4],
                            hspace=1.2 / height * 2, top=1 - 0.7 / height, bottom=0.8 / height)
    for col, r in enumerate(results):
        ax = fig.add_subplot(grid[0, col])
        jobs = r.jobs[:max_jobs]
        for y, j in enumerate(jobs):
            for start, stop, what in j.segments:
                width = max(stop - start, 0.0) / unit
                if what == "pending":
                    ax.barh(y, width, left=start / unit, color="#d9d9d9", height=0.7)
                elif what == "run":
                    ax.barh(y, width, left=start / unit, color=color.get(j.group, "tab:blue"), height=0.7)
                else:
                    ax.barh(
                        y,
                        width,
                        left=start / unit,
                        color="white",
                        edgecolor="tab:red",
                        hatch="///",
                        height=0.7,
                    )
            if j.deadline is not None:
                ax.plot([j.deadline / unit] * 2, [y - 0.45, y + 0.45], color="black", linewidth=1.5)
        ax.set_yticks(range(len(jobs)))
        labels = ax.set_yticklabels([j.name for j in jobs], fontsize=6)
        for lab, j in zip(labels, jobs, strict=True):
            if j.deadline is not None and not j.met_deadline:
                lab.set_color("tab:red")
        ax.invert_yaxis()
        ax.set_xlim(0, end / unit)
        met = sum(j.met_deadline for j in r.jobs)
        due = sum(j.deadline is not None for j in r.jobs)
        ax.set_title(f"{r.policy}: {met}/{due} deadlines met, {r.preemptions} preemptions", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        ux = fig.add_subplot(grid[1, col])
        xs, ys = [], []
        for t, used, total, _ in r.timeline:
            xs.append(t / unit)
            ys.append(100 * used / total if total else 0.0)
        if xs:
            xs.append(r.end / unit)
            ys.append(ys[-1])
        ux.step(xs, ys, where="post", color="tab:green")
        ux.set_ylim(0, 105)
        ux.set_xlim(0, end / unit)
        ux.set_ylabel("GPU util %", fontsize=8)
        ux.set_xlabel(f"virtual time ({unit_name})", fontsize=8)
        ux.grid(alpha=0.3)
    legend = [
        Patch(color="#d9d9d9", label="pending"),
        Patch(facecolor="white", edgecolor="tab:red", hatch="///", label="lost (preempted or evicted)"),
        *(Patch(color=c, label=f"running: {g}") for g, c in color.items()),
    ]
    fig.legend(
        handles=legend[:12],
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(6, len(legend)),
        fontsize=7,
        frameon=False,
    )
    fig.suptitle(f"scenario {results[0].scenario}" if results else "", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    tmp.replace(path)  # atomic: a reader never sees half a picture
    return path
