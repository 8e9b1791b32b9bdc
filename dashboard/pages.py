"""Pages and fragments: the views (``views.py``, ``charts.py``) rendered by Jinja2 templates
(``templates/``, autoescaped: names, messages and Event text are the cluster's, not ours)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from lwsflow.controller.api.phases import PolicyAction, PolicyPhase
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.policy.actions import ACTIONS
from lwsflow.controller.rollout.outcome import INCONCLUSIVE_REASON
from lwsflow.dashboard import charts, views
from lwsflow.dashboard.cache import Cache

__all__ = ["ACTIONS", "NotShown", "Renderer"]

# which buttons a phase enables (the action itself still decides: the buttons only spare a click)
ENABLED: dict[PolicyAction, tuple[PolicyPhase, ...]] = {
    PolicyAction.PROMOTE: (PolicyPhase.WAITING_FOR_PROMOTION,),
    PolicyAction.PAUSE: (PolicyPhase.PROGRESSING, PolicyPhase.WAITING_FOR_PROMOTION),
    PolicyAction.RESUME: (PolicyPhase.PAUSED,),
    PolicyAction.ABORT: (PolicyPhase.PROGRESSING, PolicyPhase.PAUSED, PolicyPhase.WAITING_FOR_PROMOTION),
    PolicyAction.RETRY: views.FINAL_BAD,
}
CONFIRM = {PolicyAction.PROMOTE: "Pass the manual gate of {p}: start stage {n}?",
           PolicyAction.PAUSE: "Pause the rollout of {p}?", PolicyAction.RESUME: "Resume the rollout of {p}?",
           PolicyAction.ABORT: "Abort the rollout of {p} and roll back to the stable revision?",
           PolicyAction.RETRY: "Roll out again the release whose rollout of {p} failed?"}
CONFIRM_INCONCLUSIVE = "Pass stage {n} of {p} although its analysis decided nothing (too little traffic)?"


# what an empty overview shows: the smallest policy to start from (tests/dashboard check it is valid)
EXAMPLE = """apiVersion: lwsflow.io/v1alpha1
kind: RolloutPolicy
metadata:
  name: my-model
spec:
  targetRef: {kind: LeaderWorkerSet, name: my-model}
  stages:
  - groups: 1
    bake: 5m
  - groups: 100%
"""


class NotShown(Exception):
    """A page for something this dashboard does not show (another namespace, a deleted policy)."""


class Renderer:
    def __init__(self, cache: Cache, now: Callable[[], float], title: str = "") -> None:
        self.cache, self.now = cache, now
        self.title = title or (
            "all namespaces" if cache.namespace is None else f"namespace {cache.namespace}")
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                                      autoescape=True, trim_blocks=True, lstrip_blocks=True,
                                      undefined=jinja2.StrictUndefined)
        self.env.filters["short"] = views.short

    def _render(self, template: str, **ctx: Any) -> str:
        return self.env.get_template(template).render(title=self.title, **ctx)

    # -- overview --------------------------------------------------------------------------------------
    def overview_fragment(self) -> str:
        self.cache.wait_synced("rolloutpolicies", 10.0)
        rows = views.overview(self.cache, self.now())
        return self._render("_overview.html", rows=rows, errors=self.cache.errors,
                            synced="rolloutpolicies" in self.cache.synced, example=EXAMPLE,
                            scope=self.title, ns=self.cache.namespace or "default")

    def overview_page(self) -> str:
        return self._render("overview.html", fragment=Markup(self.overview_fragment()))

    # -- one rollout -----------------------------------------------------------------------------------
    def policy(self, ns: str, name: str) -> Obj:
        if self.cache.namespace is not None and ns != self.cache.namespace:
            raise NotShown(f"{ns}/{name}: this dashboard shows {self.title}")
        self.cache.wait_synced("rolloutpolicies", 10.0)
        p = self.cache.get("rolloutpolicies", ns, name)
        if p is None:
            raise NotShown(f"rolloutpolicy {ns}/{name} not found")
        return p

    def rollout_fragment(self, ns: str, name: str) -> str:
        p = self.policy(ns, name)
        s, spec = p.get("status") or {}, p.get("spec") or {}
        rows = [views.role_row(self.cache, role, o) for role, o in views.targets(self.cache, p)]
        analysis, metrics = charts.analysis(p)
        phase = s.get("phase") or PolicyPhase.IDLE.value
        cur = int(s.get("currentStage") or 0)
        # paused because a stage's analysis decided nothing: promote passes that stage
        held = phase == PolicyPhase.PAUSED and any(c.get("reason") == INCONCLUSIVE_REASON
                                         for c in s.get("conditions") or [])
        buttons = [{"action": a.value, "enabled": phase in ENABLED[a] or (held and a == PolicyAction.PROMOTE),
                    "confirm": (CONFIRM_INCONCLUSIVE if held and a == PolicyAction.PROMOTE
                                else CONFIRM[a]).format(
                        p=f"{ns}/{name}", n=cur)} for a in ACTIONS]
        ref = spec.get("targetRef") or {}
        return self._render(
            "_rollout.html", ns=ns, name=name, p=p, s=s, spec=spec, phase=phase,
            target=f"{ref.get('kind', '?')}/{ref.get('name', '?')}", stages=views.timeline(p), rows=rows,
            skew=views.skew(rows), problem=views.problem(p), revs=views.policy_revisions(p),
            stable=s.get("stableRevision") or "",
            analysis=analysis, metrics=metrics, pd_probe=s.get("pdProbe"),
            events=views.events(self.cache, p, rows), buttons=buttons, bg=s.get("blueGreen"),
            weights=Markup(charts.weights_chart(self.cache.weights.get((ns, name), []))),
            charts={m.name: Markup(m.svg) for m in metrics}, errors=self.cache.errors,
            age=views.age((p.get("metadata") or {}).get("creationTimestamp"), self.now()))

    def rollout_page(self, ns: str, name: str) -> str:
        return self._render("rollout.html", ns=ns, name=name,
                            fragment=Markup(self.rollout_fragment(ns, name)))

    # -- the rest --------------------------------------------------------------------------------------
    def action_result(self, action: str, said: str, kind: str, status: int) -> str:
        return self._render("_action.html", action=action, said=said, kind=kind, status=status)

    def error_fragment(self, text: str) -> str:
        return self._render("_error.html", text=text)

    def error_page(self, text: str) -> str:
        return self._render("error.html", text=text)
