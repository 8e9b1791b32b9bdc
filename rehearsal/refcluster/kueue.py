"""Kueue on the reference cluster (``lwsflow refcluster up --kueue``): its manager, built from the
pinned module by ``scripts/build-refcluster``, with its CRDs, its ClusterRole and its webhooks, served
with a certificate of the cluster's own CA and reached by URL on 127.0.0.1 (as Kueue's own integration
tests run it against a bare kube-apiserver). Only the LeaderWorkerSet integration is on (with the pod
integration it implies), so a queue-labelled LWS gets one Workload per group and its pods a scheduling
gate until the group is admitted (docs/reference-cluster.md, "Kueue").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lwsflow.controller.errors import ApiError, NotFound
from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents
from lwsflow.rehearsal.refcluster import binaries, pki

NAMESPACE = "kueue-system"
SERVICE_ACCOUNT = "kueue-controller-manager"
# the frameworks Kueue manages here: LWS (which implies "pod"); Kueue's default list names a dozen
# batch frameworks whose CRDs the reference cluster does not have
FRAMEWORKS = ("leaderworkerset.x-k8s.io/leaderworkerset",)
# With internal certificate management off, Kueue v0.17's manager loads a metrics serving pair from
# this fixed path and exits without it (cmd/kueue/main.go), even with metrics off ("0"), as here: the
# pair is loaded, never served. ``up --kueue`` writes one there when none is.
METRICS_CERTS = Path("/etc/kueue/metrics/certs")


def config(hook_port: int, probe_port: int, cert_dir: Path) -> dict[str, Any]:
    """Kueue's manager configuration: no leader election, no internal certificates (the launcher's CA
    signs them), webhooks and probes on 127.0.0.1, metrics off."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": NAMESPACE,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": hook_port, "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
        "metrics": {"bindAddress": "0"},
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }


def crds() -> list[dict[str, Any]]:
    files = sorted((binaries.kueue_share() / "crd" / "bases").glob("*.yaml"))
    return [d for f in files for d in load_yaml_documents(f) if d]


def cluster_role() -> dict[str, Any]:
    role = next(d for d in load_yaml_documents(binaries.kueue_share() / "rbac" / "role.yaml")
                if d and d.get("kind") == "ClusterRole")
    role["metadata"] = {"name": "kueue-manager-role"}
    return role


def secrets_role() -> dict[str, Any]:
    """Kueue's Role on Secrets in its own namespace (its cache watches them there)."""
    role = load_yaml_documents(binaries.kueue_share() / "rbac" / "manager_secrets_role.yaml")[0]
    role["metadata"] = {"name": "kueue-manager-secrets-role", "namespace": NAMESPACE}
    return role


_PROBE_FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                 "metadata": {"name": "lwsflow-admission-probe"}, "spec": {}}


def admits(kube: Any) -> bool:
    """A server-side dry run through Kueue's webhooks (failurePolicy Fail): true once they answer."""
    try:
        kube.request("POST", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors", body=_PROBE_FLAVOR,
                     query={"dryRun": "All"})
    except (ApiError, NotFound):
        return False
    return True


def _metrics_pair(pair: pki.KeyPair) -> None:
    from lwsflow.controller.errors import OperationFailed
    from lwsflow.rehearsal.refcluster import launcher as L

    if (METRICS_CERTS / "tls.crt").is_file() and (METRICS_CERTS / "tls.key").is_file():
        return
    try:
        L._write_private(METRICS_CERTS / "tls.key", pair.key_pem)
        L._write_private(METRICS_CERTS / "tls.crt", pair.cert_pem)
    except PermissionError:
        raise OperationFailed(f"--kueue: Kueue's manager needs a certificate pair in {METRICS_CERTS} "
                              "(a path fixed in its code); run once as root to write it") from None


def start(kube: Any, procs: Any, state: Path, url: str, ca: pki.KeyPair, ca_key: Any,
          ports: tuple[int, int], deadline: float) -> None:
    """Install Kueue's CRDs and RBAC, start its manager, then register its webhooks (the launcher's
    ``_start`` calls this once the LWS controller is up, with its process table and CA)."""
    from lwsflow.rehearsal.refcluster import launcher as L

    hook, probe = ports
    pkid = state / "pki" / "kueue"
    serving = pki.serving_cert(ca, ca_key, "kueue-webhook")
    L._write_private(pkid / "tls.crt", serving.cert_pem)
    L._write_private(pkid / "tls.key", serving.key_pem)
    _metrics_pair(pki.serving_cert(ca, ca_key, "kueue-metrics"))
    for crd in crds():
        L._create(kube, crd)
    L._create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    L._create(kube, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT}},
              f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts")
    L._create(kube, cluster_role())
    L._create(kube, L._binding("ClusterRole", "kueue-manager-role", SERVICE_ACCOUNT, NAMESPACE))
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}"
    L._create(kube, secrets_role(), f"{rbac}/roles")
    L._create(kube, L._binding("Role", "kueue-manager-secrets-role", SERVICE_ACCOUNT, NAMESPACE),
              f"{rbac}/rolebindings")
    for crd in crds():
        L._wait_crd(kube, crd["metadata"]["name"])
    token = kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token",
                         body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                               "spec": {"audiences": [L.SA_ISSUER], "expirationSeconds": 7 * 86400}})
    kc = L._kubeconfig(state / "kubeconfigs" / "kueue", url, token["status"]["token"], ca.cert_pem)
    cfg = state / "kueue-config.yaml"
    cfg.write_text(dump_yaml(config(hook, probe, pkid)))
    # the visibility API server needs an APIService and its own serving setup; nothing here reads it
    proc, log = procs.start("kueue", binaries.kueue_program(), [
        f"--config={cfg}", "--feature-gates=VisibilityOnDemand=false"], env={"KUBECONFIG": str(kc)})
    L._wait("kueue webhooks", lambda: L._tls_listening(hook), deadline, proc, log)
    L._wait("kueue", lambda: L._http_ok(f"http://127.0.0.1:{probe}/readyz"), deadline, proc, log)
    for doc in L._webhook_configs(binaries.kueue_share() / "webhook", "kueue", hook, ca.cert_pem):
        L._create(kube, doc)
    L._wait("Kueue webhook admission", lambda: admits(kube), deadline, proc, log)
