"""Draws a timeline as a PNG: per LWS / DS role, capacity (ready groups), updated groups and
desired replicas over virtual time, GPUs in use on a second axis, and the scenario's stage marks.

One legend for the figure (below the panels), the title above them, GPUs on a red right axis with red
ticks (groups on the left), and every mark labelled at its line in the top panel (marks at the same
moment share a label; labels of close marks alternate between the line's ends)."""

from __future__ import annotations

from pathlib import Path

from lwsflow.sim.timeline import Timeline

GPU_COLOR = "tab:red"


def plot(timeline: Timeline, path: str | Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    keys = sorted(timeline.series)
    n = max(1, len(keys))
    marks: dict[float, str] = {}
    for m in timeline.marks:
        marks[m.t] = f"{marks[m.t]}; {m.label}" if m.t in marks else m.label
    height = 2.6 * n + 1.3
    fig, axes = plt.subplots(n, 1, figsize=(10, height), sharex=True, squeeze=False)
    end = max([s.t for seq in timeline.series.values() for s in seq] + [m.t for m in timeline.marks] + [1.0])
    gpus_drawn = False
    for ax, key in zip(axes[:, 0], keys or [""], strict=False):
        seq = timeline.series.get(key, [])
        ts = [s.t / 60 for s in seq] + [end / 60]

        def ys(attr: str, seq: list = seq) -> list[int]:
            vals = [getattr(s, attr) for s in seq]
            return vals + vals[-1:]

        if seq:
            ax.step(ts, ys("desired"), where="post", color="0.6", linestyle="--")
            ax.step(ts, ys("ready"), where="post", color="tab:green")
            ax.step(ts, ys("updated"), where="post", color="tab:blue")
            ax.step(ts, ys("replicas"), where="post", color="tab:orange", alpha=0.6)
            gx = ax.twinx()
            gx.step(ts, ys("gpus"), where="post", color=GPU_COLOR, alpha=0.35)
            gx.set_ylim(0, max([*ys("gpus"), 1]) * 1.15)  # from zero: GPU use is a capacity, not a delta
            gx.set_ylabel("GPUs", color=GPU_COLOR)
            gx.tick_params(axis="y", colors=GPU_COLOR)
            gpus_drawn = True
        low, prev = False, None
        for t, label in sorted(marks.items()):
            ax.axvline(t / 60, color="k", linewidth=0.8, alpha=0.5)
            if ax is axes[0, 0]:  # labelled where it happened, on the top panel
                low = (not low) if prev is not None and t - prev < end * 0.04 else False
                prev = t
                text = label if len(label) <= 48 else label[:47] + "…"
                ax.annotate(text, (t / 60, 0.03 if low else 0.97), xycoords=("data", "axes fraction"),
                            rotation=90, fontsize=6.5, va="bottom" if low else "top", ha="right", color="0.2")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("groups", color="tab:blue")
        ax.tick_params(axis="y", colors="tab:blue")
        ax.set_title(key, fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("virtual time (minutes)")
    handles = [Line2D([], [], color="0.6", linestyle="--", label="desired"),
               Line2D([], [], color="tab:green", label="ready (capacity)"),
               Line2D([], [], color="tab:blue", label="updated"),
               Line2D([], [], color="tab:orange", alpha=0.6, label="replicas"),
               Line2D([], [], color="k", alpha=0.5, label="stage mark (labelled, top panel)")]
    if gpus_drawn:
        handles.append(Line2D([], [], color=GPU_COLOR, alpha=0.35, label="GPUs in use (right axis)"))
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0.55 / height, 1, 1))
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
