"""The cross-revision P/D compatibility probe (controller/pd/compat.py): before a P/D rollout mixes
revisions, hand KV off from a new-revision prefill pod to an old-revision decode pod and the reverse,
over HTTP against the engines (smoke-reference §4.3 recipes 5 and 6).

**Where the new-revision pods come from: a canary group per changed role, outside the serving pool.**
A staged rollout's first stage would give one updated group per role, but those groups serve as soon
as they are Ready: the Services select them by LWS name, the InferencePool by ``lwsflow.io/model``, and
the router pairs any prefill pod with any decode pod. Mixed traffic would start before the probe could
answer, which is what the probe exists to prevent. A DisaggregatedSet has no partition at all, so its
rollout cannot be held after one group. So the probe creates, per role whose template changes, a
one-group LWS ``<name>-pdp`` (``-pdp-<role>`` for a DS) with the **new** template and labels that no
Service, InferencePool or pair selects (no model, pair or DS labels; the served model name moves to the
``lwsflow.io/served-model`` annotation so the engine still answers to it), waits until it is Ready,
probes, and deletes it before the rollout begins. The cost: one group per changed role must fit next
to everything that runs (checked first; the probe refuses to guess when it does not fit), and one
model load before the rollout.

Directions: ``new prefill -> old decode`` (the prefill role changes), ``old prefill -> new decode``
(the decode role changes) and, when both change, ``new prefill -> new decode`` as the control: a
release that cannot hand off even to itself is broken, not incompatible. Each direction is the smoke
test's hand-off (``pd-prefill``, ``pd-decode``, ``pd-metrics``), so a decode engine that silently
recomputes (``kv_load_failure_policy=recompute``) fails it too.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

from lwsflow.components.smoke.client import Deadline, SmokeClient
from lwsflow.components.smoke.model import CheckResult, Endpoint, SmokeConfig
from lwsflow.components.smoke.pd import handoff
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.serving import serving_port
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import ApiError, Fenced, NotFound
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS, NODE, POD
from lwsflow.controller.pd.compat import CompatContext, CompatProbe, CompatResult, RoleRevision
from lwsflow.controller.rollout import capacity, gate

log = logging.getLogger("lwsflow.pd_probe")

PROBE_LABEL = f"{L.LWSFLOW}/pd-probe"  # on the canary LWS and its pods: not serving, deleted after
POLL_S = 2.0  # cluster seconds between looks at the canary pods
PROMPT = "lwsflow cross-revision P/D compatibility probe: " + "the quick brown fox jumps over the dog " * 6
# labels that put a pod in a Service, an InferencePool, a pair or a DS: a canary carries none of them
_SERVING_LABELS = (L.MODEL, L.PD_PAIR, L.DS_NAME, L.DS_ROLE, L.DS_SLICE, L.DS_REVISION, "app")


@dataclass(frozen=True)
class Direction:
    """One hand-off to try: a prefill endpoint, a decode endpoint and what to call it."""

    name: str  # e.g. "new prefill -> old decode"
    prefill: Endpoint
    decode: Endpoint


def canary_name(ctx: CompatContext, role: RoleRevision) -> str:
    """``<pair LWS>-pdp`` or ``<ds>-pdp-<role>``: a DNS label (the pods add ``-<group>-<worker>``)."""
    if ctx.kind == L.DS_KIND:
        return f"{ctx.name}-pdp-{role.role}"
    selector = dict(kv.split("=", 1) for kv in role.stable_selector.split(","))
    return f"{selector.get(L.NAME, ctx.name)}-pdp"


def canary_lws(name: str, namespace: str, role: RoleRevision) -> Obj:
    """A one-group LWS with the role's new template that no Service, InferencePool or pair selects."""
    spec = copy.deepcopy(role.template_owner.get("spec") or {})
    spec["replicas"] = 1
    spec.pop("rolloutStrategy", None)  # no partition: the one group comes up at once
    lwt = spec.get("leaderWorkerTemplate") or {}
    for key in ("leaderTemplate", "workerTemplate"):
        tpl = lwt.get(key)
        if not isinstance(tpl, dict):
            continue
        meta = tpl.setdefault("metadata", {})
        labels = meta.setdefault("labels", {})
        model = labels.get(L.MODEL)
        for k in _SERVING_LABELS:
            labels.pop(k, None)
        labels.update({PROBE_LABEL: "true", L.ROLE: role.role})
        if model:  # the engine answers to the model's name without the label that selects it
            meta.setdefault("annotations", {}).setdefault(L.SERVED_MODEL, model)
    return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {PROBE_LABEL: "true", L.ROLE: role.role}},
            "spec": spec}


def _endpoint(pod: Obj, role: str, what: str) -> Endpoint:
    meta = pod.get("metadata") or {}
    ann, lbl = meta.get("annotations") or {}, meta.get("labels") or {}
    port = serving_port(pod.get("spec") or {}, ann)
    return Endpoint(target=f"{what} {role} pod {meta.get('name')}", role=role,
                    url=f"http://{(pod.get('status') or {}).get('podIP')}:{port}",
                    model=ann.get(L.SERVED_MODEL) or lbl.get(L.MODEL), pod=meta.get("name"))


def _serving_leaders(kube: Kube, namespace: str, selector: str) -> list[Obj]:
    pods, _ = kube.list(POD, namespace, label_selector=f"{selector},{L.WORKER_INDEX}=0")
    return sorted((p for p in pods if (p.get("status") or {}).get("phase") == "Running"
                   and gate.pod_ready(p) and (p.get("status") or {}).get("podIP")
                   and not (p.get("metadata") or {}).get("deletionTimestamp")),
                  key=lambda p: p["metadata"]["name"])


def directions(new: dict[str, Endpoint], old: dict[str, Endpoint]) -> list[Direction]:
    """The hand-offs to try, given a new-revision endpoint per changed role and an old one per role."""
    out = []
    if "prefill" in new:
        out.append(Direction("new prefill -> old decode", new["prefill"], old["decode"]))
    if "decode" in new:
        out.append(Direction("old prefill -> new decode", old["prefill"], new["decode"]))
    if "prefill" in new and "decode" in new:
        out.append(Direction("new prefill -> new decode", new["prefill"], new["decode"]))
    return out


def probe_handoffs(dirs: list[Direction], timeout_s: float = 10.0) -> CompatResult:
    """Try each hand-off over HTTP; the verdict names every direction that failed and why."""
    cfg = SmokeConfig(request_timeout_s=timeout_s, retries=2, deadline_s=max(30.0, 6 * timeout_s * len(dirs)),
                      max_tokens=4)
    http = SmokeClient(cfg, Deadline(cfg.deadline_s))
    failed: list[str] = []
    why: list[str] = []
    checks: list[dict[str, object]] = []
    try:
        for d in dirs:
            results: list[CheckResult] = handoff(d.prefill, d.decode, d.name, cfg, http, PROMPT)
            checks += [{"direction": d.name, "prefill": d.prefill.target, "decode": d.decode.target,
                        **r.model_dump(include={"name", "passed", "detail"})} for r in results]
            bad = next((r for r in results if not r.passed and not r.skipped), None)
            if bad is not None:
                failed.append(d.name)
                why.append(f"{d.name}: {bad.name}: {bad.detail}")
    finally:
        http.close()
    if "new prefill -> new decode" in failed:
        why.append("the new revision cannot hand KV off even to itself: a broken release, not only an "
                   "incompatible one")
    ok = not failed
    detail = (f"KV hand-off passed {', '.join(d.name for d in dirs)}" if ok else "; ".join(why))
    return CompatResult(ok, detail, failed, checks)


def pd_probe(kube: Kube | None = None, timeout_s: float = 10.0) -> CompatProbe:
    """The probe the rollout runs before it mixes revisions of a pair or a DisaggregatedSet.

    Its requests go through ``ctx.kube`` when the context carries a connection (the in-cluster
    controller's, fenced on its leadership: a deposed leader creates and deletes no canary), else
    through ``kube``."""
    def probe(ctx: CompatContext) -> CompatResult:
        conn = ctx.kube if ctx.kube is not None else kube
        if conn is None:
            return CompatResult(False, "the probe was given no cluster connection", ran=False)
        return _run(conn, ctx, timeout_s)
    probe.__name__ = "pd-probe"
    return probe


def _run(kube: Kube, ctx: CompatContext, timeout_s: float) -> CompatResult:
    """The probe on ``kube``: canaries of the changed roles, the hand-offs, the canaries removed."""
    changed = [r for r in ctx.roles.values() if r.changed]
    if not changed:
        return CompatResult(True, "no role changes its template: nothing to mix")
    old: dict[str, Endpoint] = {}
    for role in ("prefill", "decode"):
        if role not in ctx.roles:
            return CompatResult(False, f"no {role} role in {ctx.kind} {ctx.name}", ran=False)
        leaders = _serving_leaders(kube, ctx.namespace, ctx.roles[role].stable_selector)
        if not leaders:  # a first install or a role at 0: no old revision to mix with
            return CompatResult(True, f"no Ready {role} pod of the current revision serves: nothing "
                                      "to mix with")
        old[role] = _endpoint(leaders[0], role, "old")
    nodes, _ = kube.list(NODE)
    pods, _ = kube.list(POD, field_selector="status.phase!=Succeeded,status.phase!=Failed")
    fit = capacity.canary_fits([r.template_owner for r in changed], nodes, pods)
    if not fit.fits:
        roles = ", ".join(r.role for r in changed)
        return CompatResult(False, f"one canary group per changed role ({roles}) must fit next to what "
                            f"runs: {fit.message}", ran=False)
    names = {r.role: canary_name(ctx, r) for r in changed}
    _remove(kube, ctx, list(names.values()))  # a canary left by a probe that was killed
    try:
        for r in changed:
            kube.create(LWS, ctx.namespace, canary_lws(names[r.role], ctx.namespace, r))
        new = _wait_ready(kube, ctx, names)
        if isinstance(new, str):
            return CompatResult(False, new, ran=False)
        return probe_handoffs(directions(new, old), timeout_s)
    finally:
        _remove(kube, ctx, list(names.values()))


def _wait_ready(kube: Kube, ctx: CompatContext, names: dict[str, str]) -> dict[str, Endpoint] | str:
    """The canaries' Ready leader endpoints, or why they did not come up within the deadline."""
    end = ctx.clock.now() + ctx.deadline_s
    while True:
        new = {}
        for role, name in names.items():
            leaders = _serving_leaders(kube, ctx.namespace, f"{L.NAME}={name}")
            if leaders:
                new[role] = _endpoint(leaders[0], role, "new")
        if len(new) == len(names):
            return new
        if ctx.clock.now() >= end:
            missing = sorted(set(names) - set(new))
            return (f"the canary group(s) {', '.join(names[r] for r in missing)} of the new revision were "
                    f"not Ready within {ctx.deadline_s:g}s")
        ctx.clock.sleep(POLL_S)


def _remove(kube: Kube, ctx: CompatContext, names: list[str]) -> None:
    """Delete the canaries and wait until their pods are gone (their GPUs count for the rollout)."""
    for name in names:
        try:
            kube.delete(LWS, ctx.namespace, name)
        except NotFound:
            pass
        except Fenced:  # no longer ours to write (a deposed leader): the next probe removes it first
            raise
        except ApiError as exc:  # the rollout has not started; say so and leave it to a human
            log.warning("could not delete probe canary %s/%s: %s", ctx.namespace, name, exc)
    end = ctx.clock.now() + ctx.deadline_s
    selector = ",".join([f"{PROBE_LABEL}=true"])
    while ctx.clock.now() < end:
        pods, _ = kube.list(POD, ctx.namespace, label_selector=selector)
        if not any((p.get("metadata") or {}).get("labels", {}).get(L.NAME) in names for p in pods):
            return
        ctx.clock.sleep(POLL_S)
