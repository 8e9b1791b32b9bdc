"""Argo CD integration: one ``Application`` per environment overlay plus the LWS/DS health checks.

Each Application syncs ``<path>/<env>`` (the environment aggregate) and ignores
``/spec/rolloutStrategy/rollingUpdateConfiguration/partition`` on LeaderWorkerSets: the lwsflow
rollout controller owns that field during a staged rollout, and ``RespectIgnoreDifferences=true``
makes a sync keep the live value instead of resetting it to the rendered one (without it the
ignore only hides the diff, and a sync would still undo a stage).

Health checks are Lua in the ``argocd-cm`` key format
``resource.customizations.health.<group>_<kind>``; the scripts live in
``components/argocd_health/*.lua`` (see their headers for the rules). They are written as a
ConfigMap fragment (``argocd-cm-health.yaml``) to merge into an existing ``argocd-cm``, since the real
ConfigMap holds the installation's other settings.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from lwsflow.components.kustomize import env_models, environments, kustomize_build
from lwsflow.components.overlays import KUSTOMIZATION, KUSTOMIZE_API, drift, read_kustomization, write_tree
from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.yamlio import dump_yaml

PARTITION_POINTER = "/spec/rolloutStrategy/rollingUpdateConfiguration/partition"
HEALTH_KEY = "resource.customizations.health.{group}_{kind}"
HEALTH_SCRIPTS = {
    (L.LWS_GROUP, L.LWS_KIND): "leaderworkerset.lua",
    (L.DS_GROUP, L.DS_KIND): "disaggregatedset.lua",
    ("lwsflow.io", "RolloutPolicy"): "rolloutpolicy.lua",  # the in-cluster controller's policy
}
CM_FILE = "argocd-cm-health.yaml"


def health_script(kind: str) -> str:
    """The Lua health check for ``LeaderWorkerSet``, ``DisaggregatedSet`` or ``RolloutPolicy``."""
    for (_group, k), name in HEALTH_SCRIPTS.items():
        if k == kind:
            return resources.files("lwsflow.components.argocd_health").joinpath(name).read_text()
    raise KeyError(kind)


def health_configmap(namespace: str = "argocd") -> dict[str, Any]:
    """The ``argocd-cm`` fragment carrying the health checks."""
    data = {HEALTH_KEY.format(group=g, kind=k): health_script(k) for (g, k) in HEALTH_SCRIPTS}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "argocd-cm",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "argocd-cm", "app.kubernetes.io/part-of": "argocd"},
        },
        "data": data,
    }


def _env_namespace(tree: Path, env: str) -> str | None:
    namespaces = {
        str((read_kustomization(tree / env / m / KUSTOMIZATION) or {}).get("namespace", ""))
        for m in env_models(tree, env)
    }
    return namespaces.pop() if len(namespaces) == 1 and "" not in namespaces else None


def autoscaled(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(namespace, name) of every LeaderWorkerSet an HPA in ``objects`` scales."""
    out: set[tuple[str, str]] = set()
    for o in objects:
        ref = (o.get("spec") or {}).get("scaleTargetRef") or {}
        if o.get("kind") == "HorizontalPodAutoscaler" and ref.get("kind") == L.LWS_KIND:
            out.add((str(o.get("metadata", {}).get("namespace", "")), str(ref.get("name", ""))))
    return sorted(out)


def application(
    env: str,
    *,
    repo_url: str,
    path: str,
    revision: str,
    namespace: str,
    dest_namespace: str | None,
    hpa_targets: Iterable[tuple[str, str]] = (),
) -> dict[str, Any]:
    """The Argo CD Application syncing ``<path>/<env>``.

    LeaderWorkerSets scaled by an HPA also ignore ``/spec/replicas``: the HPA owns it once running,
    and a self-healing sync would otherwise reset every scaling decision to the rendered count.
    """
    ignore: list[dict[str, Any]] = [
        {"group": L.LWS_GROUP, "kind": L.LWS_KIND, "jsonPointers": [PARTITION_POINTER]}
    ]
    for ns, name in hpa_targets:
        entry: dict[str, Any] = {"group": L.LWS_GROUP, "kind": L.LWS_KIND, "name": name}
        if ns:
            entry["namespace"] = ns
        ignore.append({**entry, "jsonPointers": ["/spec/replicas"]})
    destination: dict[str, Any] = {"server": "https://kubernetes.default.svc"}
    if dest_namespace:
        destination["namespace"] = dest_namespace
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {
            "name": f"lwsflow-{env}",
            "namespace": namespace,
            "labels": {L.APP_PART_OF: "lwsflow", "lwsflow.io/environment": env},
        },
        "spec": {
            "project": "default",
            "source": {"repoURL": repo_url, "targetRevision": revision, "path": f"{path.rstrip('/')}/{env}"},
            "destination": destination,
            "syncPolicy": {
                "automated": {"prune": True, "selfHeal": True},
                "syncOptions": [
                    "CreateNamespace=true",
                    "ServerSideApply=true",
                    "RespectIgnoreDifferences=true",
                ],
            },
            "ignoreDifferences": ignore,
        },
    }


def argocd_files(
    tree: Path, *, repo_url: str, path: str = "overlays", revision: str = "HEAD", namespace: str = "argocd"
) -> dict[str, bytes]:
    """Every file of the Argo CD folder, keyed by name."""
    if not repo_url:
        raise InvalidInput("must name the git repository Argo CD pulls", field="repo-url")
    envs = environments(Path(tree))
    if not envs:
        raise InvalidInput("no environment overlays to point Applications at", source=str(tree))
    files: dict[str, bytes] = {}
    for env in envs:
        app = application(
            env,
            repo_url=repo_url,
            path=path,
            revision=revision,
            namespace=namespace,
            dest_namespace=_env_namespace(Path(tree), env),
            hpa_targets=autoscaled(kustomize_build(Path(tree) / env)),
        )
        files[f"application-{env}.yaml"] = dump_yaml(app).encode()
    files[CM_FILE] = dump_yaml(health_configmap(namespace)).encode()
    files[KUSTOMIZATION] = dump_yaml(
        {
            "apiVersion": KUSTOMIZE_API,
            "kind": "Kustomization",
            "resources": [f"application-{e}.yaml" for e in envs],
        }
    ).encode()
    return files


def write_argocd(
    tree: Path,
    out: Path,
    *,
    repo_url: str,
    path: str = "overlays",
    revision: str = "HEAD",
    namespace: str = "argocd",
    check: bool = False,
) -> list[str]:
    """Write (or with ``check`` compare) the Argo CD folder ``out``; returns the differing files."""
    out = Path(out)
    root, roots = out.parent, [out.name]
    files = {
        f"{out.name}/{k}": v
        for k, v in argocd_files(
            tree, repo_url=repo_url, path=path, revision=revision, namespace=namespace
        ).items()
    }
    changed = drift(root, files, roots) if check else write_tree(root, files, roots)
    return [c.split("/", 1)[1] for c in changed]
