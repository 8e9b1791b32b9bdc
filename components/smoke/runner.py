"""``run_smoke(SmokeConfig) -> SmokeReport``: the smoke test as one Python call (CLI and stage hook).

Order: discover targets (cluster and explicit URLs) → placement per LWS → per-endpoint checks →
P/D hand-off per prefill/decode pair → the gateway check. Everything is bounded by the config's
per-request timeout, retry count and total deadline.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

from lwsflow.components.smoke import pd, placement, targets
from lwsflow.components.smoke.checks import EndpointChecks, skipped
from lwsflow.components.smoke.client import Deadline, SmokeClient
from lwsflow.components.smoke.model import CheckResult, Endpoint, SmokeConfig, SmokeReport
from lwsflow.controller.api import labels
from lwsflow.controller.errors import ApiError, InvalidInput

# Long enough that a prefix-based P/D decider (uncached chars/4 >= nonCachedTokens) disaggregates.
_FILLER = ("A LeaderWorkerSet runs one leader and several workers per replica; the leader serves HTTP, "
           "the workers hold tensor and pipeline shards, and a rollout moves groups in stages. ")


def prompts(run_id: str) -> tuple[str, str]:
    """(short prompt for pods, long gateway prompt); both start with the per-run id so no cache has them."""
    short = f"[{run_id}] lwsflow smoke: say a few words about leader worker sets."
    return short, f"[{run_id}] " + _FILLER * 24 + "Summarise that in one line."


def run_smoke(cfg: SmokeConfig) -> SmokeReport:
    """Run every check the config asks for and return the report (never raises for a failed check)."""
    if not (cfg.urls or cfg.prefill_url or cfg.decode_url or cfg.gateway_url or cfg.targets):
        raise InvalidInput("nothing to check: give --url, --prefill-url/--decode-url, --gateway-url or "
                           "a cluster target", field="targets")
    if bool(cfg.prefill_url) != bool(cfg.decode_url):
        raise InvalidInput("--prefill-url and --decode-url go together", field="prefill_url")
    t0 = time.monotonic()
    deadline = Deadline(cfg.deadline_s)
    run_id = uuid.uuid4().hex[:12]
    short, long_prompt = prompts(run_id)
    http = SmokeClient(cfg, deadline)
    checks: list[CheckResult] = []
    try:
        endpoints: list[Endpoint] = [Endpoint(target=u, url=u, model=cfg.model) for u in cfg.urls]
        pairs: list[tuple[Endpoint, Endpoint, str]] = []
        if cfg.prefill_url and cfg.decode_url:
            p = Endpoint(target=cfg.prefill_url, url=cfg.prefill_url, role="prefill", model=cfg.model)
            d = Endpoint(target=cfg.decode_url, url=cfg.decode_url, role="decode", model=cfg.model)
            endpoints += [p, d]
            pairs.append((p, d, f"{p.url} -> {d.url}"))
        if cfg.targets:
            found, found_pairs = _from_cluster(cfg, checks)
            endpoints += found
            pairs += found_pairs
        health: dict[str, bool] = {}
        for ep in endpoints:
            res = _check_endpoint(ep, cfg, http, short)
            health[ep.url] = next((r.passed for r in res if r.name == "health"), False)
            checks += res
        for p, d, label in pairs:
            down = [e.url for e in (p, d) if not health.get(e.url)]
            if down:
                checks += [skipped(n, label, f"health failed on {', '.join(down)}")
                           for n in ("pd-prefill", "pd-decode", "pd-metrics")]
            else:
                checks += pd.handoff(p, d, label, cfg, http, long_prompt)
        if cfg.gateway_url:
            gw = Endpoint(target=cfg.gateway_url, url=cfg.gateway_url, role="gateway", model=cfg.model)
            checks += _check_endpoint(gw, cfg, http, long_prompt, gateway=True)
            decodes = [e for e in endpoints if e.role == "decode" and health.get(e.url)]
            checks.append(pd.gateway_pd(gw, decodes, cfg, http, long_prompt))
    finally:
        http.close()
    return SmokeReport.build(checks, time.monotonic() - t0)


def _check_endpoint(ep: Endpoint, cfg: SmokeConfig, http: SmokeClient, prompt: str,
                    gateway: bool = False) -> list[CheckResult]:
    """The per-endpoint checks; a model they discovered in /v1/models (no --model given) is kept on
    ``ep`` so the P/D hand-off and the gateway check ask for the same model."""
    checker = EndpointChecks(ep, cfg, http, prompt, gateway=gateway)
    res = checker.run()
    if ep.model is None:
        ep.model = checker.model
    return res


def _from_cluster(cfg: SmokeConfig, checks: list[CheckResult]) -> tuple[list[Endpoint],
                                                                       list[tuple[Endpoint, Endpoint, str]]]:
    """Discover leader endpoints and P/D pairs; placement and discovery problems become checks."""
    from lwsflow.controller.kube.client import Kube

    t0 = time.monotonic()
    kube = Kube.connect(cfg.kubeconfig, cfg.context, attempts=cfg.retries)
    cluster = targets.ClusterTargets(kube, cfg.namespace, cfg.request_timeout_s)
    try:
        found = cluster.discover(cfg.targets, cfg.revision_only)
    except ApiError as exc:
        checks.append(CheckResult(name="discover", target=",".join(cfg.targets), passed=False,
                                  detail=f"cluster unreachable: {exc}"))
        return [], []
    for target, problem in found.problems:
        checks.append(CheckResult(name="discover", target=target, passed=False, detail=problem))
    if cluster.services_problem:  # the leaders' Services went unchecked: no pass without them
        checks.append(CheckResult(name="service", target=",".join(cfg.targets), passed=False,
                                  detail=cluster.services_problem))
    endpoints: list[Endpoint] = []
    by_role: dict[tuple[str, str], dict[str, list[Endpoint]]] = defaultdict(lambda: defaultdict(list))
    expect = placement.Expectation(cfg.gpu_product, cfg.node_pool, cfg.gpus_per_pod)
    nodes: dict[str, dict] = {}
    for g in found.groups:
        leaders = [p for p in g.pods if targets.label_of(p, labels.WORKER_INDEX) == "0"
                   and targets.label_of(p, labels.GROUP_INDEX) in g.group_indexes]
        no_ip = []
        for pod in sorted(leaders, key=lambda p: p["metadata"]["name"]):
            if svc_problem := targets.service_problem(pod, g.services):
                checks.append(CheckResult(name="service", target=f"{g.target} pod {pod['metadata']['name']}",
                                          passed=False, detail=svc_problem))
                continue
            url = targets.leader_url(pod, g.lws, g.services)
            if url is None:
                no_ip.append(f"{pod['metadata']['name']} ({(pod.get('status') or {}).get('phase')})")
                continue
            role = g.role if g.role in ("prefill", "decode") else "aggregated"
            ep = Endpoint(target=f"{g.target} pod {pod['metadata']['name']}", url=url, role=role,
                          model=cfg.model or targets.served_model(pod, g.lws), pod=pod["metadata"]["name"],
                          group=g.target.split(":")[0])
            endpoints.append(ep)
            by_role[(ep.group or "", targets.ds_revision(g))][role].append(ep)
        ok = bool(leaders) and not no_ip
        detail = (f"{len(leaders)} leader(s)" + (f" rev {g.revision}" if g.revision else "")
                  + (f"; no IP yet: {', '.join(no_ip)}" if no_ip else "") if leaders
                  else "no leader pods" + (f" on revision {g.revision}" if g.revision else ""))
        checks.append(CheckResult(name="discover", target=g.target, passed=ok, detail=detail,
                                  duration_s=round(time.monotonic() - t0, 4)))
        if cfg.placement and leaders:
            checks.append(_placement(cluster, g, nodes, expect))
    pairs = []
    for (group, _rev), roles in sorted(by_role.items()):
        ps, ds = roles.get("prefill", []), roles.get("decode", [])
        if group.startswith(("pair/", "ds/")) and (ps or ds) and not (ps and ds):
            checks.append(CheckResult(name="pd-pairing", target=group, passed=False,
                                      detail=f"{len(ps)} prefill and {len(ds)} decode leaders: need both"))
        for i in range(max(len(ps), len(ds)) if ps and ds else 0):
            p, d = ps[i % len(ps)], ds[i % len(ds)]
            pairs.append((p, d, f"{group} {p.pod} -> {d.pod}"))
    return endpoints, pairs


def _placement(cluster: targets.ClusterTargets, g: targets.Group, nodes: dict[str, dict],
               expect: placement.Expectation) -> CheckResult:
    t0 = time.monotonic()
    name = None
    try:
        for pod in g.pods:
            name = (pod.get("spec") or {}).get("nodeName")
            if name and name not in nodes:
                node = cluster.node(name)
                if node is not None:
                    nodes[name] = node
    except ApiError as exc:  # the API server's words (e.g. 403 and the verb RBAC refused) are the cause
        return CheckResult(name="placement", target=g.target, passed=False,
                           detail=f"cannot read node {name}: {exc}")
    problems = placement.check_lws_placement(g.lws, g.pods, nodes, expect, g.group_indexes)
    n = sum(1 for p in g.pods if targets.label_of(p, labels.GROUP_INDEX) in g.group_indexes)
    more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
    detail = ("; ".join(problems[:5]) + more if problems
              else f"{n} pod(s) in {len(g.group_indexes)} group(s) on the expected pool")
    return CheckResult(name="placement", target=g.target, passed=not problems, detail=detail,
                       duration_s=round(time.monotonic() - t0, 4), data={"problems": problems})
