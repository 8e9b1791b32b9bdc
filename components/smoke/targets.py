"""Find what to smoke-test in the cluster: leader pods of an LWS, a P/D pair of LWS, or a DS.

- ``lws/NAME``: the leader pods (``worker-index: "0"``) of LeaderWorkerSet NAME.
- ``pair/NAME``: both LWS labelled ``lwsflow.io/pd-pair=NAME``; their role from ``lwsflow.io/role``.
- ``ds/NAME``: the child LWS of DisaggregatedSet NAME (``disaggregatedset.x-k8s.io/name``), one per
  role (``/role``) and revision (``/revision``); prefill and decode are paired within a revision.

With ``revision_only`` only pods of the newest template revision count (the leader StatefulSet's
``template-revision-hash`` label, as the LWS controller writes it; else the newest leader's). Each
leader's URL is ``http://<podIP>:<port>``: the port is the ``targetPort`` of a Service in the namespace
that selects the leader (what traffic through it reaches, so a Service aimed at a port nobody serves
fails), else the engine's serving port from the pod spec (``controller.api.serving``); the model comes
from ``lwsflow.io/served-model``. Services that cannot be read (other than a 404) are a failed
``service`` check, not a silent fall-back to the pod spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lwsflow.controller.api import labels
from lwsflow.controller.api.serving import resolve_port, serving_port
from lwsflow.controller.errors import ApiError, NotFound
from lwsflow.controller.kube import resources
from lwsflow.controller.kube.client import Kube

STS = resources.Resource("apps", "v1", "statefulsets")
SERVICE = resources.Resource("", "v1", "services")


@dataclass
class Group:
    """One LWS under test: the object, the pods of the checked groups, and their leaders' endpoints."""

    target: str
    lws: dict
    role: str
    pods: list[dict]
    revision: str = ""
    group_indexes: set[str] = field(default_factory=set)
    services: list[dict] = field(default_factory=list)  # Services of the namespace (leader ports)


@dataclass
class Discovery:
    """What discovery found, plus problems (each becomes a failed ``discover`` check)."""

    groups: list[Group] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (target, problem)


class ClusterTargets:
    """Reads LWS, pods, StatefulSets and nodes through ``lwsflow.controller.kube`` with bounded timeouts."""

    def __init__(self, kube: Kube, namespace: str, timeout_s: float) -> None:
        self.kube, self.ns, self.timeout = kube, namespace, timeout_s
        self._services: list[dict] | None = None
        # why the Services could not be read (e.g. a 403: RBAC without `services list`); the runner
        # makes it a failed ``service`` check, since the leaders' Service was then never checked
        self.services_problem: str | None = None

    def services(self) -> list[dict]:
        """The namespace's Services, read once. None found (or a 404) is no problem: the ports come
        from the pod specs. Any other error is kept in ``services_problem``."""
        if self._services is None:
            try:
                self._services = list(self._get(SERVICE.path(self.ns)).get("items") or [])
            except NotFound:
                self._services = []
            except ApiError as exc:
                self._services = []
                self.services_problem = f"cannot list services in {self.ns}: {exc}"
        return self._services

    def _get(self, path: str, query: dict | None = None) -> dict:
        return self.kube.request("GET", path, query=query, timeout=self.timeout)

    def _list(self, res: resources.Resource, selector: str) -> list[dict]:
        return list(self._get(res.path(self.ns), {"labelSelector": selector}).get("items") or [])

    def node(self, name: str) -> dict | None:
        """The node ``name``, read with ``list`` and a name field selector: the one verb on nodes the
        controller's role grants (its capacity check lists them too), so no ``get`` is needed."""
        items = self._get(resources.NODE.path(None), {"fieldSelector": f"metadata.name={name}"}).get("items")
        return (items or [None])[0]

    def discover(self, targets: list[str], revision_only: bool) -> Discovery:
        out = Discovery()
        for t in targets:
            kind, _, name = t.partition("/")
            try:
                if kind == "lws":
                    lws_list = [self._get(resources.LWS.path(self.ns, name))]
                elif kind == "pair":
                    lws_list = self._list(resources.LWS, f"{labels.PD_PAIR}={name}")
                else:
                    lws_list = self._list(resources.LWS, f"{labels.DS_NAME}={name}")
                    if revision_only:
                        lws_list = _newest_ds_revision(lws_list)
            except ApiError as exc:
                out.problems.append((t, f"cannot read {t} in {self.ns}: {exc}"))
                continue
            if not lws_list:
                out.problems.append((t, f"no LeaderWorkerSet found for {t} in namespace {self.ns}"))
                continue
            for lws in lws_list:
                try:
                    out.groups.append(self._group(t, lws, revision_only))
                except ApiError as exc:
                    out.problems.append((t, f"cannot list pods of {lws['metadata']['name']}: {exc}"))
        return out

    def _group(self, target: str, lws: dict, revision_only: bool) -> Group:
        name = lws["metadata"]["name"]
        pods = self._list(resources.POD, f"{labels.NAME}={name}")
        revision = self._newest_revision(lws, pods) if revision_only else ""
        leaders = [p for p in pods if label_of(p, labels.WORKER_INDEX) == "0"
                   and (not revision or label_of(p, labels.TEMPLATE_REVISION_HASH) == revision)]
        groups = {label_of(p, labels.GROUP_INDEX) for p in leaders}
        role = (label_of(lws, labels.DS_ROLE) or label_of(lws, labels.ROLE)
                or _tpl_labels(lws).get(labels.ROLE) or "aggregated")
        return Group(target=f"{target}:{name}" if target.split("/", 1)[1] != name else target, lws=lws,
                     role=role, pods=pods, revision=revision, group_indexes=groups,
                     services=self.services())

    def _newest_revision(self, lws: dict, pods: list[dict]) -> str:
        try:
            sts = self._get(STS.path(self.ns, lws["metadata"]["name"]))
            if h := label_of(sts, labels.TEMPLATE_REVISION_HASH):
                return h
        except ApiError:
            pass  # no StatefulSet view (or not allowed): fall back to the pods
        if h := label_of(lws, labels.TEMPLATE_REVISION_HASH):
            return h
        leaders = sorted((p for p in pods if label_of(p, labels.WORKER_INDEX) == "0"),
                         key=lambda p: p["metadata"].get("creationTimestamp", ""))
        return label_of(leaders[-1], labels.TEMPLATE_REVISION_HASH) if leaders else ""


def label_of(obj: dict, key: str) -> str:
    """A label of an object, "" when absent."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(key, "")


def _tpl_labels(lws: dict) -> dict:
    lwt = lws.get("spec", {}).get("leaderWorkerTemplate", {})
    tpl = lwt.get("leaderTemplate") or lwt.get("workerTemplate") or {}
    return (tpl.get("metadata") or {}).get("labels") or {}


def _tpl_annotations(lws: dict) -> dict:
    lwt = lws.get("spec", {}).get("leaderWorkerTemplate", {})
    tpl = lwt.get("leaderTemplate") or lwt.get("workerTemplate") or {}
    return (tpl.get("metadata") or {}).get("annotations") or {}


def _newest_ds_revision(lws_list: list[dict]) -> list[dict]:
    """Child LWS of the DS revision created last (prefill and decode of one revision go together)."""
    if not lws_list:
        return []
    newest = max(lws_list, key=lambda o: o["metadata"].get("creationTimestamp", ""))
    rev = label_of(newest, labels.DS_REVISION)
    return [o for o in lws_list if label_of(o, labels.DS_REVISION) == rev]


def leader_url(pod: dict, lws: dict, services: list[dict] | None = None) -> str | None:
    """``http://podIP:port`` of a leader pod, or None while it has no IP (port: module doc)."""
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        return None
    spec = pod.get("spec") or {}
    ann = {**_tpl_annotations(lws), **((pod.get("metadata") or {}).get("annotations") or {})}
    port = _service_port(pod, services or []) or serving_port(spec, ann)
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}"


def _leader_service(pod: dict, services: list[dict]) -> tuple[dict, int | str] | None:
    """(Service, its targetPort: port ``http``, else the first) of the first Service selecting ``pod``."""
    pod_labels = (pod.get("metadata") or {}).get("labels") or {}
    for svc in sorted(services, key=lambda s: s["metadata"].get("name", "")):
        sel = (svc.get("spec") or {}).get("selector") or {}
        ports = (svc.get("spec") or {}).get("ports") or []
        if not sel or not ports or any(pod_labels.get(k) != v for k, v in sel.items()):
            continue
        p = next((p for p in ports if p.get("name") == "http"), ports[0])
        return svc, p.get("targetPort", p.get("port"))
    return None


def _service_port(pod: dict, services: list[dict]) -> int | None:
    found = _leader_service(pod, services)
    return resolve_port(pod.get("spec") or {}, found[1]) if found else None


def service_problem(pod: dict, services: list[dict]) -> str | None:
    """A Service that selects the leader with a named targetPort no container declares: like
    kube-proxy, it then has no endpoint for the pod, so nothing sent through it arrives."""
    found = _leader_service(pod, services)
    if found is None or resolve_port(pod.get("spec") or {}, found[1]) is not None:
        return None
    return (f"Service {found[0]['metadata'].get('name')} selects {pod['metadata']['name']} but its "
            f"targetPort {found[1]!r} is no container port of the pod: it has no endpoint there")


def served_model(pod: dict, lws: dict) -> str | None:
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    return (ann.get(labels.SERVED_MODEL) or _tpl_annotations(lws).get(labels.SERVED_MODEL)
            or label_of(pod, labels.MODEL) or None)


def ds_revision(group: Group) -> str:
    return label_of(group.lws, labels.DS_REVISION)
