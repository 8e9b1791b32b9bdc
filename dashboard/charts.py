"""Charts as server-side SVG: an analysis metric's measurements (new revision against stable, the
tolerance band, each verdict) and a blue-green's HTTPRoute weights over time.

Drawn on the server, not by a JavaScript chart library: a chart has at most
``ANALYSIS_MEASUREMENTS_LIMIT`` points, it travels inside the HTML fragment the live update swaps in
(so it needs no client code of its own), works offline, and its points carry their numbers as data
attributes that the tests read (docs/architecture.md, "The dashboard").
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from lwsflow.controller.api.wire import Obj

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 520, 180, 52, 12, 12, 26
COLOURS = {"successful": "#2e7d32", "failed": "#c62828", "inconclusive": "#ef8f00"}


@dataclass(frozen=True)
class MetricView:
    name: str
    phase: str  # the metric's verdict at its latest stage
    counts: str  # "3 successful, 1 failed, 0 inconclusive"
    band: str  # how the band is computed, in words
    svg: str
    last: list[dict[str, Any]]  # the last measurements, newest first (a table under the chart)


def band_limit(compare: dict[str, Any] | None, baseline: float | None) -> float | None:
    """The value a measurement may reach before it fails, or None where the comparison is a
    statistical test (proportion, histogram) or there is no baseline."""
    if not compare or baseline is None:
        return None
    tol, mode = float(compare.get("tolerance") or 0), compare.get("mode", "relative")
    sign = -1.0 if compare.get("better") == "higher" else 1.0
    if mode == "relative":
        return baseline * (1 + sign * tol / 100)
    if mode == "absolute":
        return baseline + sign * tol
    return None


def _band_text(compare: dict[str, Any] | None) -> str:
    if not compare:
        return "no comparison: the success/failure condition decides"
    mode, tol = compare.get("mode", "relative"), compare.get("tolerance", 0)
    worse = "above" if compare.get("better", "lower") == "lower" else "below"
    if mode == "relative":
        return f"fails {worse} stable * (1 {'+' if worse == 'above' else '-'} {tol}%)"
    if mode == "absolute":
        return f"fails {worse} stable {'+' if worse == 'above' else '-'} {tol}"
    return f"{mode} test at tolerance {tol} (see each measurement's detail)"


def metric_chart(measurements: list[dict[str, Any]], compare: dict[str, Any] | None) -> str:
    """One metric: new (line with a dot per measurement, coloured by its verdict), stable (dashed),
    the tolerance band (shaded up to the limit)."""
    pts = [(i, m) for i, m in enumerate(measurements)]
    values = [float(m[k]) for _i, m in pts for k in ("value", "baseline") if m.get(k) is not None]
    limits = [lim for _i, m in pts if (lim := band_limit(compare, m.get("baseline"))) is not None]
    ys = values + limits
    lo, hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 1, hi + 1
    lo, hi = lo - (hi - lo) * 0.08, hi + (hi - lo) * 0.08
    n = max(1, len(pts) - 1)

    def x(i: int) -> float:
        return PAD_L + (W - PAD_L - PAD_R) * (i / n if len(pts) > 1 else 0.5)

    def y(v: float) -> float:
        return PAD_T + (H - PAD_T - PAD_B) * (1 - (v - lo) / (hi - lo))

    out = [f'<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">',
           f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" height="{H - PAD_T - PAD_B}" '
           'class="plot"/>']
    for v in (lo + (hi - lo) * f for f in (0.1, 0.5, 0.9)):
        out.append(f'<text x="{PAD_L - 4}" y="{y(v) + 4:.1f}" class="tick" '
                   f'text-anchor="end">{v:.3g}</text>')
    band = [(x(i), y(lim)) for i, m in pts
            if (lim := band_limit(compare, m.get("baseline"))) is not None]
    if band:
        worse_up = (compare or {}).get("better", "lower") == "lower"
        edge = PAD_T if worse_up else H - PAD_B  # shade the failing side
        poly = " ".join(f"{a:.1f},{b:.1f}" for a, b in band)
        out.append(f'<polygon class="fail-zone" points="{band[0][0]:.1f},{edge} {poly} '
                   f'{band[-1][0]:.1f},{edge}"/>')
        out.append(f'<polyline class="limit" points="{poly}"/>')
    base = [(x(i), y(float(m["baseline"]))) for i, m in pts if m.get("baseline") is not None]
    if base:
        out.append('<polyline class="stable" points="'
                   + " ".join(f"{a:.1f},{b:.1f}" for a, b in base) + '"/>')
    new = [(x(i), y(float(m["value"])), m) for i, m in pts if m.get("value") is not None]
    if new:
        out.append('<polyline class="new" points="'
                   + " ".join(f"{a:.1f},{b:.1f}" for a, b, _m in new) + '"/>')
    for a, b, m in new:
        lim = band_limit(compare, m.get("baseline"))
        phase, stage = escape(str(m.get("phase", ""))), int(m.get("stage") or 0)
        out.append(f'<circle class="point {phase}" cx="{a:.1f}" cy="{b:.1f}" r="4" '
                   f'fill="{COLOURS.get(phase, "#555")}" data-stage="{stage}" '
                   f'data-value="{float(m["value"]):.6g}" data-limit="{"" if lim is None else f"{lim:.6g}"}" '
                   f'data-verdict="{phase}"><title>stage {stage} #{int(m.get("index") or 0)}: {phase} — '
                   f'{escape(str(m.get("detail", "")))}</title></circle>')
    stages = sorted({int(m.get("stage") or 0) for _i, m in pts})
    for s in stages:
        first = next(i for i, m in pts if int(m.get("stage") or 0) == s)
        out.append(f'<text x="{x(first):.1f}" y="{H - 8}" class="tick">stage {s}</text>')
    if not pts:
        out.append(f'<text x="{W / 2}" y="{H / 2}" class="tick" text-anchor="middle">'
                   'no measurement yet</text>')
    out.append("</svg>")
    return "".join(out)


def analysis(policy: Obj) -> tuple[dict[str, Any], list[MetricView]]:
    """``status.analysis`` of the policy (its header) and one chart per metric."""
    a = (policy.get("status") or {}).get("analysis") or {}
    compares = {m.get("name"): m.get("compare") for m in
                ((policy.get("spec") or {}).get("analysis") or {}).get("metrics") or []}
    views = []
    for m in a.get("metrics") or []:
        ms = list(m.get("measurements") or [])
        views.append(MetricView(
            m.get("name", ""), m.get("phase") or "running",
            f"{m.get('successful', 0)} successful, {m.get('failed', 0)} failed, "
            f"{m.get('inconclusive', 0)} inconclusive", _band_text(compares.get(m.get("name"))),
            metric_chart(ms, compares.get(m.get("name"))), list(reversed(ms))[:8]))
    return a, views


def weights_chart(history: list[tuple[float, int, int]]) -> str:
    """Green's share of the HTTPRoute's traffic at each change the dashboard saw (a step line)."""
    if not history:
        return ""
    t0, t1 = history[0][0], max(history[-1][0], history[0][0] + 1)

    def x(t: float) -> float:
        return PAD_L + (W - PAD_L - PAD_R) * (t - t0) / (t1 - t0)

    def y(w: int) -> float:
        return PAD_T + (H - PAD_T - PAD_B) * (1 - w / 100)

    pts: list[str] = []
    for i, (t, _b, g) in enumerate(history):
        if i:
            pts.append(f"{x(t):.1f},{y(history[i - 1][2]):.1f}")
        pts.append(f"{x(t):.1f},{y(g):.1f}")
    out = [f'<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">',
           f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" height="{H - PAD_T - PAD_B}" '
           'class="plot"/>']
    for w in (0, 50, 100):
        out.append(f'<text x="{PAD_L - 4}" y="{y(w) + 4:.1f}" class="tick" text-anchor="end">{w}%</text>')
    out.append(f'<polyline class="new" points="{" ".join(pts)}"/>')
    for t, b, g in history:
        out.append(f'<circle class="point" cx="{x(t):.1f}" cy="{y(g):.1f}" r="3" data-green="{g}" '
                   f'data-blue="{b}"><title>blue {b}% / green {g}%</title></circle>')
    out.append("</svg>")
    return "".join(out)
