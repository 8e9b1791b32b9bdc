"""What each page shows, as plain data computed from the cache (pure functions: tested without a
server or a browser). Templates only lay these out.

Every fact comes from the cluster as the controller wrote it: phase, stage and revisions from the
policy's ``status`` (``controller/policy/status.py`` derives it), analysis from ``status.analysis``,
groups from the pods' LWS labels, the GPU pool from the node's labels.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.phases import PolicyPhase
from lwsflow.controller.api.wire import Obj
from lwsflow.dashboard.cache import Cache

# overview order: what needs a person first (failed, then paused or held at a gate), then the rest
# (every phase ranked: tests/dashboard/unit/test_phases.py holds it to the CRD's enum)
_RANK: dict[str, int] = {
    PolicyPhase.FAILED: 0, PolicyPhase.ROLLED_BACK: 1, PolicyPhase.ABORTED: 2, PolicyPhase.PAUSED: 3,
    PolicyPhase.WAITING_FOR_PROMOTION: 4, PolicyPhase.PROGRESSING: 5, PolicyPhase.IDLE: 9,
    PolicyPhase.SUCCEEDED: 9}
FINAL_BAD = (PolicyPhase.FAILED, PolicyPhase.ROLLED_BACK, PolicyPhase.ABORTED)


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def age(created: str | None, now: float) -> str:
    """kubectl's short age: 45s, 12m, 3h, 5d."""
    t = _ts(created)
    if t is None:
        return "-"
    s = max(0, int(now - t))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def short(rev: str | None) -> str:
    return (rev or "")[:10] or "-"


@dataclass(frozen=True)
class Row:
    namespace: str
    name: str
    target: str
    strategy: str
    phase: str
    stage: str
    stable: str
    canary: str
    age: str
    message: str
    problem: str = ""  # what makes the policy unable to roll anything out ("" none): marked on the row


def problem(policy: Obj) -> str:
    """Why a policy cannot roll anything out, in a few words ("" when nothing stops it): its target
    is missing or owned by an older policy, Kueue holds its groups, its spec is invalid, or its
    rollout was refused."""
    s = policy.get("status") or {}
    conds = s.get("conditions") or []
    if any(c.get("type") == "TargetFound" and c.get("status") == "False" for c in conds):
        return "target missing"
    if any(c.get("type") == "QuotaBlocked" and c.get("status") == "True" for c in conds):
        return "quota blocked"  # paused: Kueue holds groups (the message names the ClusterQueue)
    reasons = {c.get("reason") for c in conds if c.get("status") == "False"}
    if "TargetOwned" in reasons:
        return "target owned by another policy"
    if "Refused" in reasons:
        return "rollout refused"
    # Failed with no rollout (or in the controller's words for a spec it cannot read, which keep an
    # earlier rollout's id): the spec itself is wrong
    message = str(s.get("message") or "")
    if s.get("phase") == "Failed" and (not s.get("rolloutId") or message.startswith("spec")):
        return "invalid spec"
    return ""


def _ended(policy: Obj) -> dict[int, str]:
    """Stage number (1-based) -> "passed" or "failed" in the policy's last rollout, from its history
    (the target's stage log, copied when the rollout ended)."""
    s = policy.get("status") or {}
    rec = next((h for h in reversed(s.get("history") or []) if h.get("id") == s.get("rolloutId")), None)
    out: dict[int, str] = {}
    for e in (rec or {}).get("stages") or []:
        n, result = e.get("stage"), e.get("result")
        if isinstance(n, int) and result in ("passed", "failed") and out.get(n) != "failed":
            out[n] = result  # a pair's roles: one failed role fails the stage
    return out


def stage_text(policy: Obj) -> str:
    """The overview's stage column: "2 of 3" while it runs, "3 of 3" once it succeeded, "failed at 2
    of 3" after a failed stage, "- of 3" otherwise."""
    spec, s = policy.get("spec") or {}, policy.get("status") or {}
    stages = int(s.get("stages") or len(spec.get("stages") or []))
    cur = int(s.get("currentStage") or 0)
    if cur:
        return f"{cur} of {stages}"
    if s.get("phase") == PolicyPhase.SUCCEEDED:
        return f"{stages} of {stages}"
    failed = [n for n, r in _ended(policy).items() if r == "failed"] if s.get("phase") in FINAL_BAD else []
    return f"failed at {min(failed)} of {stages}" if failed else f"- of {stages}"


def overview(cache: Cache, now: float) -> list[Row]:
    """Every policy in scope, broken and failed ones first, then paused ones, then by namespace and
    name."""
    rows = []
    for p in cache.items("rolloutpolicies"):
        spec, s, meta = p.get("spec") or {}, p.get("status") or {}, p["metadata"]
        ref = spec.get("targetRef") or {}
        rows.append(Row(meta.get("namespace", ""), meta["name"],
                        f"{ref.get('kind', '?')}/{ref.get('name', '?')}",
                        spec.get("strategy", "partition"), s.get("phase") or PolicyPhase.IDLE.value,
                        stage_text(p), short(s.get("stableRevision")),
                        short(s.get("canaryRevision")), age(meta.get("creationTimestamp"), now),
                        s.get("message") or "", problem(p)))
    # a policy that cannot roll anything out ranks beside an aborted one: after what just failed
    rows.sort(key=lambda r: (min(_RANK.get(r.phase, 9), 2.5) if r.problem else _RANK.get(r.phase, 9),
                         r.namespace, r.name))
    return rows


# -- one rollout ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StageView:
    number: int
    what: str  # "1 group", "25%", "weight 10%"
    bake: str
    gated: bool  # a manual gate before it
    checks: list[str]
    state: str  # planned | passed | current | gated | failed
    analysis: str  # the analysis verdict at this stage ("" none)


def timeline(policy: Obj) -> list[StageView]:
    spec, s = policy.get("spec") or {}, policy.get("status") or {}
    phase, cur = s.get("phase") or PolicyPhase.IDLE.value, int(s.get("currentStage") or 0)
    a = s.get("analysis") or {}
    verdicts = {int(v.get("stage") or 0): v.get("phase", "") for v in a.get("verdicts") or []} \
        if a.get("rolloutId") == s.get("rolloutId") else {}
    ended = _ended(policy) if phase in FINAL_BAD else {}
    gate = PolicyPhase.WAITING_FOR_PROMOTION
    out = []
    for k, st in enumerate(spec.get("stages") or []):
        n = k + 1
        if phase == PolicyPhase.SUCCEEDED:
            state = "passed"
        elif phase in (PolicyPhase.PROGRESSING, PolicyPhase.PAUSED, gate) and cur:
            state = "passed" if n < cur else ("gated" if n == cur and phase == gate
                                              else "current" if n == cur else "planned")
        elif phase in FINAL_BAD and (verdicts.get(n) == "Failed" or ended.get(n) == "failed"):
            state = "failed"
        elif phase in FINAL_BAD and ended.get(n) == "passed":
            state = "passed"  # passed before a later stage failed (the rollback undid it)
        else:
            state = "planned"
        groups = st.get("groups")
        what = f"weight {st['weight']}%" if st.get("weight") is not None else (
            f"{groups} group{'s' if groups != 1 else ''}" if isinstance(groups, int) else str(groups))
        checks = [c.get("name") or next((k for k in ("smoke", "http", "command") if k in c), "check")
                  for c in st.get("checks") or []]
        out.append(StageView(n, what, st.get("bake") or "0s", "pause" in st, checks, state,
                             verdicts.get(n, "")))
    return out


@dataclass
class Pod:
    name: str
    leader: bool
    ready: bool
    node: str
    pool: str


@dataclass
class Group:
    index: int
    revision: str
    new: bool  # on the LWS's current (updated) revision
    ready: bool
    pods: list[Pod] = field(default_factory=list)


@dataclass
class RoleRow:
    role: str  # "aggregated", "prefill", "decode", or a DS role
    lws: str
    replicas: int
    partition: int
    updated: int  # groups on the current revision
    ready: int
    groups: list[Group]


def _pod_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _labels(o: Obj | None) -> dict[str, str]:
    return ((o or {}).get("metadata") or {}).get("labels") or {}


def targets(cache: Cache, policy: Obj) -> list[tuple[str, Obj]]:
    """(role, LWS) rows the policy's target consists of: one LWS; a pair's decode then prefill
    (blue-green: blue's then green's); a DS's child LWS per role."""
    ns = policy["metadata"].get("namespace", "")
    ref = (policy.get("spec") or {}).get("targetRef") or {}
    kind, name = ref.get("kind"), ref.get("name", "")
    lws = cache.items("leaderworkersets", ns)
    if kind == "LeaderWorkerSet":
        o = cache.get("leaderworkersets", ns, name)
        return [("aggregated", o)] if o else []
    if kind == "LeaderWorkerSetPair":
        bg = (policy.get("status") or {}).get("blueGreen") or {}
        pairs = [bg["bluePair"], bg["greenPair"]] if bg.get("bluePair") and bg.get("greenPair") else [name]
        rows = []
        for pair in pairs:
            mine = sorted((o for o in lws if _labels(o).get(L.PD_PAIR) == pair),
                          key=lambda o: (_labels(o).get(L.ROLE) != "decode", o["metadata"]["name"]))
            tag = f"{pair} " if len(pairs) > 1 else ""
            rows += [(f"{tag}{_labels(o).get(L.ROLE, '?')}", o) for o in mine]
        return rows
    if kind == "DisaggregatedSet":
        kids = [o for o in lws if _labels(o).get(L.DS_NAME) == name]
        kids.sort(key=lambda o: (_labels(o).get(L.DS_ROLE, ""), o["metadata"]["name"]))
        return [(f"{_labels(o).get(L.DS_ROLE, '?')} ({o['metadata']['name']})", o) for o in kids]
    return []


def role_row(cache: Cache, role: str, lws: Obj) -> RoleRow:
    """One LWS as a row of group cells: each group's revision (its leader's template-revision-hash),
    readiness (every pod Ready), its pods and the nodes and pool they run on."""
    ns, name = lws["metadata"].get("namespace", ""), lws["metadata"]["name"]
    spec = lws.get("spec") or {}
    replicas = int(spec.get("replicas", 1) or 0)
    ruc = ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {})
    sts = cache.get("statefulsets", ns, name) if "statefulsets" in cache.objects else None
    current = _labels(sts).get(L.TEMPLATE_REVISION_HASH, "")
    groups: dict[int, Group] = {}
    for pod in cache.items("pods", ns):
        lab = _labels(pod)
        if lab.get(L.NAME) != name or not lab.get(L.GROUP_INDEX, "").isdigit():
            continue
        idx = int(lab[L.GROUP_INDEX])
        node = (pod.get("spec") or {}).get("nodeName") or ""
        nlab = _labels(cache.get("nodes", "", node)) if node else {}
        pool = nlab.get(L.NODE_POOL) or nlab.get(L.GPU_PRODUCT) or ""
        leader = lab.get(L.WORKER_INDEX, "0") == "0"
        g = groups.setdefault(idx, Group(idx, "", False, True))
        g.pods.append(Pod(pod["metadata"]["name"], leader, _pod_ready(pod), node, pool))
        g.ready = g.ready and _pod_ready(pod)
        if leader:
            g.revision = lab.get(L.TEMPLATE_REVISION_HASH, "")
    if not current and groups:  # no StatefulSet in view: the LWS updates from the highest ordinal down
        current = groups[max(groups)].revision
    for g in groups.values():
        g.new = bool(current) and g.revision == current
        g.pods.sort(key=lambda p: (not p.leader, p.name))
    cells = [groups[i] for i in sorted(groups)]
    return RoleRow(role, name, replicas, int(ruc.get("partition") or 0), sum(g.new for g in cells),
                   sum(g.ready for g in cells), cells)


def policy_revisions(policy: Obj) -> dict[bool, str]:
    """The policy's template hash (stable or canary, as the page's header names them) of a group on
    the LWS's current revision (True) and of one still on the other (False): a group cell names its
    revision as the header does, not by the pods' template-revision-hash ("" where not known)."""
    s = policy.get("status") or {}
    current, stable = s.get("observedTemplateHash") or "", s.get("stableRevision") or ""
    other = stable if current != stable else (s.get("canaryRevision") or "")
    return {True: current, False: other}


def skew(rows: list[RoleRow]) -> str:
    """The spread of the roles' progress: updated share of the most and the least advanced role."""
    if len(rows) < 2:
        return ""
    shares = [(100 * r.updated // max(1, r.replicas), r.role) for r in rows]
    hi, lo = max(shares), min(shares)
    return f"{hi[0] - lo[0]} points ({hi[1]} {hi[0]}% updated, {lo[1]} {lo[0]}%)"


def events(cache: Cache, policy: Obj, rows: list[RoleRow], limit: int = 60) -> list[dict[str, Any]]:
    """The policy's Events and its targets', newest first."""
    ns, name = policy["metadata"].get("namespace", ""), policy["metadata"]["name"]
    ref = (policy.get("spec") or {}).get("targetRef") or {}
    names = {("RolloutPolicy", name), (ref.get("kind", ""), ref.get("name", ""))} | {
        ("LeaderWorkerSet", r.lws) for r in rows}
    out = []
    for e in cache.items("events", ns):
        inv = e.get("involvedObject") or e.get("regarding") or {}
        if (inv.get("kind", ""), inv.get("name", "")) not in names:
            continue
        when = e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get(
            "creationTimestamp") or ""
        out.append({"time": when, "type": e.get("type", "Normal"), "reason": e.get("reason", ""),
                    "object": f"{inv.get('kind', '')}/{inv.get('name', '')}",
                    "message": e.get("message") or e.get("note") or "", "count": e.get("count") or 1})
    out.sort(key=lambda x: _ts(x["time"]) or 0.0, reverse=True)
    return out[:limit]
