"""Records how each LWS (and each DS role) evolves in virtual time, and renders it as text.

A sample is taken after every settled batch of events and kept only when something changed, so a
six-hour rehearsal stays a few hundred rows. Series are keyed ``lws/<name>`` or ``ds/<name>/<role>``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from lwsflow.controller.api import labels as L
from lwsflow.sim.ds_controller import DS
from lwsflow.sim.lws_controller import LWS

if TYPE_CHECKING:
    from lwsflow.sim.cluster import Cluster


@dataclass(frozen=True)
class Sample:
    """Counters of one LWS (or DS role) at one virtual instant."""

    t: float  # virtual seconds since the scenario started
    desired: int
    replicas: int
    ready: int
    updated: int
    gpus: int  # GPUs held by this object's bound pods


@dataclass(frozen=True)
class Mark:
    """A labelled instant: a scenario action or a DS planner step."""

    t: float
    label: str


@dataclass
class Timeline:
    """Per-object series of samples plus marks, renderable as text, JSON or a plot."""

    start: float
    series: dict[str, list[Sample]] = field(default_factory=dict)
    marks: list[Mark] = field(default_factory=list)
    _ds_steps: dict[tuple[str, int], int] = field(default_factory=dict, repr=False)

    def mark(self, t_abs: float, label: str) -> None:
        self.marks.append(Mark(t_abs - self.start, label))

    def sample(self, c: Cluster) -> None:
        t = c.now() - self.start
        for (_ns, ds, sl), steps in c.ds.steps.items():  # DS planner steps become stage marks
            seen = self._ds_steps.get((ds, sl), 0)
            if len(steps) < seen:
                seen = 0  # a new rollout started over
            for k in range(max(seen, 1), len(steps)):
                old, new = steps[k]
                self.marks.append(Mark(t, f"{ds}/{sl} step {k}: old {_vec(old)} new {_vec(new)}"))
            self._ds_steps[(ds, sl)] = len(steps)
        gpus: dict[str, int] = {}
        for (ns, name), run in c.kubelet.runs.items():
            pod = c.store.get_raw("pods", ns, name)
            lws = ((pod or {}).get("metadata", {}).get("labels") or {}).get(L.NAME)
            if lws:
                gpus[lws] = gpus.get(lws, 0) + run.needs.gpu
        rows: dict[str, list[int]] = {}
        for o in c.store.iter_raw(LWS):
            meta, st = o["metadata"], o.get("status") or {}
            row = [
                int(o["spec"].get("replicas", 1)),
                st.get("replicas", 0),
                st.get("readyReplicas", 0),
                st.get("updatedReplicas", 0),
                gpus.get(meta["name"], 0),
            ]
            labels = meta.get("labels") or {}
            if labels.get(L.DS_NAME):
                key = f"ds/{labels[L.DS_NAME]}/{labels.get(L.DS_ROLE, '')}"
                ds_obj = c.store.get_raw(DS, meta.get("namespace", "default"), labels[L.DS_NAME])
                cur = rows.setdefault(key, [0, 0, 0, 0, 0])
                target_rev = (labels.get(L.DS_REVISION) == _ds_revision(ds_obj)) if ds_obj else True
                cur[0] += row[0]
                cur[1] += row[1]
                cur[2] += row[2]
                cur[3] += row[3] if target_rev else 0
                cur[4] += row[4]
            else:
                rows[f"lws/{meta['name']}"] = row
        for key, row in rows.items():
            s = Sample(t, *row)
            seq = self.series.setdefault(key, [])
            if not seq or (
                seq[-1].desired,
                seq[-1].replicas,
                seq[-1].ready,
                seq[-1].updated,
                seq[-1].gpus,
            ) != tuple(row):
                seq.append(s)

    def to_dict(self) -> dict:
        return {
            "series": {k: [asdict(s) for s in v] for k, v in self.series.items()},
            "marks": [asdict(m) for m in self.marks],
        }

    def render(self) -> str:
        out = []
        for key, seq in sorted(self.series.items()):
            out.append(f"{key}")
            out.append(_ROW.format("time", "desired", "replicas", "ready", "updated", "gpus"))
            out.extend(_ROW.format(hms(s.t), s.desired, s.replicas, s.ready, s.updated, s.gpus) for s in seq)
        if self.marks:
            out.append("marks")
            out.extend(f"  {hms(m.t):>9}  {m.label}" for m in self.marks)
        return "\n".join(out)


def _vec(v: tuple[int, ...]) -> str:
    return ":".join(str(x) for x in v)


def _ds_revision(ds: dict) -> str:
    from lwsflow.sim.ds_controller import revision_hash

    return revision_hash((ds.get("spec") or {}).get("roles") or [])


_ROW = "  {:>9}  {:>7}  {:>8}  {:>5}  {:>7}  {:>5}"


def hms(t: float) -> str:
    n = round(t)
    return f"{n // 3600}:{n % 3600 // 60:02d}:{n % 60:02d}"
