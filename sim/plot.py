"""Draws a timeline as a PNG: per LWS / DS role, capacity (ready groups), updated groups and
desired replicas over virtual time, GPUs in use on a second axis, and the scenario's stage marks."""

from __future__ import annotations

from pathlib import Path

from lwsflow.sim.timeline import Timeline, hms


def plot(timeline: Timeline, path: str | Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(timeline.series)
    n = max(1, len(keys))
    marks: dict[float, str] = {}
    for m in timeline.marks:
        marks[m.t] = f"{marks[m.t]}; {m.label}" if m.t in marks else m.label
    notes = [f"{k}: {hms(t)}  {text}" for k, (t, text) in enumerate(sorted(marks.items()), start=1)]
    note_h = 0.16 * len(notes)
    fig, axes = plt.subplots(n, 1, figsize=(10, 2.8 * n + note_h), sharex=True, squeeze=False)
    end = max([s.t for seq in timeline.series.values() for s in seq] + [m.t for m in timeline.marks] + [1.0])
    for ax, key in zip(axes[:, 0], keys or [""], strict=False):
        seq = timeline.series.get(key, [])
        ts = [s.t / 60 for s in seq] + [end / 60]

        def ys(attr: str, seq: list = seq) -> list[int]:
            vals = [getattr(s, attr) for s in seq]
            return vals + vals[-1:]

        if seq:
            ax.step(ts, ys("desired"), where="post", color="0.6", linestyle="--", label="desired")
            ax.step(ts, ys("ready"), where="post", color="tab:green", label="ready (capacity)")
            ax.step(ts, ys("updated"), where="post", color="tab:blue", label="updated")
            ax.step(ts, ys("replicas"), where="post", color="tab:orange", alpha=0.6, label="replicas")
            gx = ax.twinx()
            gx.step(ts, ys("gpus"), where="post", color="tab:red", alpha=0.35, label="GPUs in use")
            gx.set_ylim(0, max([*ys("gpus"), 1]) * 1.15)  # from zero: GPU use is a capacity, not a delta
            gx.set_ylabel("GPUs", color="tab:red")
        for k, t in enumerate(sorted(marks), start=1):
            ax.axvline(t / 60, color="k", linewidth=0.8, alpha=0.5)
            if ax is axes[0, 0]:  # numbered on the top panel; the numbers are explained below the plot
                ax.annotate(str(k), (t / 60, 1.01), xycoords=("data", "axes fraction"), fontsize=7,
                            ha="center", va="bottom")
        ax.set_ylabel("groups")
        ax.set_title(key, fontsize=9, loc="left")
        ax.legend(loc="lower left", fontsize=7)
    axes[-1, 0].set_xlabel("virtual time (minutes)")
    if title:
        fig.suptitle(title)
    if notes:
        fig.text(0.01, 0.005, "\n".join(notes), fontsize=7, va="bottom", ha="left", family="monospace")
    fig.tight_layout(rect=(0, note_h / (2.8 * n + note_h) + 0.01, 1, 1))
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
