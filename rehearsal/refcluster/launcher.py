"""Start and stop the reference cluster: etcd, the Kubernetes control plane, kwok and the upstream LWS
controller as local processes on 127.0.0.1 (docs/reference-cluster.md).

``up`` validates its input, then mints keys and tokens into the state folder, starts each program
(detached, logs in ``<state>/logs``), installs the LWS CRDs, RBAC and webhooks and the catalog's
nodes, waits until a pod could be admitted, scheduled and made Ready, and only then writes the admin
kubeconfig. A failed start stops what it started and removes the state folder. ``down`` stops the
programs it recorded (checking each pid still runs a binary of the cache) and removes the folder.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lwsflow.controller.api import paths
from lwsflow.controller.errors import ApiError, Conflict, InvalidInput, NotFound, OperationFailed
from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents
from lwsflow.rehearsal.refcluster import binaries, kwok_stages, pki

if TYPE_CHECKING:
    from lwsflow.sim.config import ClusterConfig

DEFAULT_STATE_DIR = Path(".lwsflow/refcluster")
KUBECONFIG = "kubeconfig"
CONTEXT = "lwsflow-refcluster"
LWS_NAMESPACE = "lws-system"  # the controller's namespace when not in a pod (utils.GetOperatorNamespace)
LWS_SERVICE_ACCOUNT = "lws-controller-manager"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
_PIDS = "pids.json"
_COMMANDS = "commands.json"  # each program's arguments, so restart() can start it again as `up` did


@dataclass(frozen=True)
class UpOptions:
    state_dir: Path = DEFAULT_STATE_DIR
    catalog: Path | None = None
    ready_delay_s: float = 2.0  # Running -> Ready of every pod whose image is not "never ready"
    never_ready: tuple[str, ...] = ()  # fnmatch image patterns whose pods never get Ready
    timeout_s: float = 180.0
    kueue: bool = False  # also Kueue's manager, CRDs and webhooks (refcluster/kueue.py)
    log: Callable[[str], None] = field(default=lambda _msg: None)


# -- small helpers ---------------------------------------------------------------------------------
def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _write_private(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
    return path


def _kubeconfig(path: Path, url: str, token: str, ca_pem: bytes) -> Path:
    from lwsflow.sim.kubeconfig import write_kubeconfig

    return write_kubeconfig(path, url, token, CONTEXT, ca_pem=ca_pem)


def _wait(what: str, check: Callable[[], bool], deadline: float, proc: subprocess.Popen | None = None,
          log: Path | None = None) -> None:
    while True:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log and log.exists() else []
            raise OperationFailed(f"{what}: exited with {proc.returncode}: {' | '.join(tail)}")
        with contextlib.suppress(Exception):
            if check():
                return
        if time.monotonic() > deadline:
            raise OperationFailed(f"{what}: not ready in time (see {log or 'the logs'})")
        time.sleep(0.2)


def _http_ok(url: str, ctx: ssl.SSLContext | None = None, token: str | None = None) -> bool:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
        return bool(resp.status == 200)


def _tls_listening(port: int) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=1) as raw, ctx.wrap_socket(raw):
        return True


# -- processes -------------------------------------------------------------------------------------
class _Procs:
    """The programs of one start, recorded in ``pids.json`` as they start (so ``down`` finds them)."""

    def __init__(self, state: Path, bin_dir: Path) -> None:
        self.state, self.bin_dir = state, bin_dir
        self.started: dict[str, subprocess.Popen] = {}

    def start(self, name: str, program: str, args: list[str], env: dict[str, str] | None = None,
              ) -> tuple[subprocess.Popen, Path]:
        log = self.state / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [str(self.bin_dir / program), *args], stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, cwd=self.state, start_new_session=True,  # outlives `up`
                env={**os.environ, **(env or {})})
        self.started[name] = proc
        _write_private(self.state / _PIDS, json.dumps({**_recorded(self.state), name: proc.pid}))
        commands = _commands(self.state)
        commands[name] = {"program": program, "args": args, "env": env or {}}
        _write_private(self.state / _COMMANDS, json.dumps(commands))
        return proc, log


def _ours(pid: int, bin_dir: Path) -> bool:
    """Whether ``pid`` still runs a program of the cache (a recycled pid is left alone)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return exe.startswith(str(bin_dir.resolve()) + os.sep)


def _stop(pids: dict[str, int], bin_dir: Path, grace_s: float = 5.0) -> list[str]:
    stopped = []
    live = {n: p for n, p in pids.items() if _ours(p, bin_dir)}
    for name in reversed(list(live)):  # dependants first, etcd last
        with contextlib.suppress(ProcessLookupError):
            os.kill(live[name], signal.SIGTERM)
            stopped.append(name)
    deadline = time.monotonic() + grace_s
    for pid in live.values():
        while _ours(pid, bin_dir) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.05)
        if _ours(pid, bin_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return stopped


def _recorded(state: Path) -> dict[str, int]:
    try:
        data = json.loads((state / _PIDS).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _commands(state: Path) -> dict[str, Any]:
    try:
        data = json.loads((state / _COMMANDS).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _gone(pid: int, bin_dir: Path) -> bool:
    return not _ours(pid, bin_dir)


def _arg(args: list[str], flag: str) -> str:
    return next((a.split("=", 1)[1] for a in args if a.startswith(flag + "=")), "")


def restart(state: Path, *names: str, timeout_s: float = 60.0) -> None:
    """SIGKILL the named programs of a running cluster (as a crash or an OOM kill would), then start
    each again, in the order named, with the arguments `up` gave it (same ports, data and keys),
    waiting for etcd's health and kube-apiserver's port before the next. For the conformance tier's
    restarts mid-rollout (tests/conformance/test_restarts.py)."""
    bin_dir, pids, commands = binaries.bin_dir(), _recorded(state), _commands(state)
    unknown = [n for n in names if n not in commands]
    if unknown:
        raise ValueError(f"not a program of this cluster: {', '.join(unknown)} "
                         f"(known: {', '.join(commands)})")
    for name in reversed(names):
        pid = pids.get(name)
        if pid is not None and _ours(pid, bin_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _wait(f"{name} gone", functools.partial(_gone, pid, bin_dir), time.monotonic() + timeout_s)
    procs = _Procs(state, bin_dir)
    for name in names:
        cmd = commands[name]
        proc, log = procs.start(name, str(cmd["program"]), list(cmd["args"]), dict(cmd["env"]))
        deadline = time.monotonic() + timeout_s
        if name == "etcd":
            client = _arg(cmd["args"], "--listen-client-urls")
            _wait("etcd", functools.partial(_http_ok, f"{client}/health"), deadline, proc, log)
        elif name == "kube-apiserver":
            port = int(_arg(cmd["args"], "--secure-port"))
            _wait("kube-apiserver", functools.partial(_tls_listening, port), deadline, proc, log)


def running(state: Path) -> bool:
    """Whether a cluster recorded in ``state`` still has its API server running."""
    pid = _recorded(state).get("kube-apiserver")
    return pid is not None and _ours(pid, binaries.bin_dir())


def down(state: Path = DEFAULT_STATE_DIR) -> list[str]:
    """Stop the recorded programs and remove the state folder; returns the names stopped."""
    stopped = _stop(_recorded(state), binaries.bin_dir()) if state.exists() else []
    if (state / _PIDS).exists() or (state / "pki").exists():  # only ever remove a folder `up` made
        shutil.rmtree(state, ignore_errors=True)
    return stopped


def kubeconfig_path(state: Path = DEFAULT_STATE_DIR) -> Path:
    path = state / KUBECONFIG
    if not path.exists() or not running(state):
        raise OperationFailed(f"no reference cluster is up in {state} (lwsflow refcluster up)")
    return path


# -- the cluster's objects -------------------------------------------------------------------------
def _nodes(catalog: Path | None) -> list[dict[str, Any]]:
    """Node objects for the catalog's pools (or the embedded cluster's default pools)."""
    from lwsflow.sim.config import ClusterConfig

    if catalog is not None:
        from lwsflow.components.catalog import load_catalog
        from lwsflow.rehearsal.catalog_cluster import cluster_config_for

        return node_objects(cluster_config_for(load_catalog(catalog)))
    return node_objects(ClusterConfig.default())


def node_objects(cfg: ClusterConfig) -> list[dict[str, Any]]:
    """The nodes of ``cfg``'s pools, built by the embedded cluster itself so both clusters get the
    same names, labels, taints and capacity, annotated for kwok to manage."""
    from lwsflow.sim.cluster import Cluster

    items, _ = Cluster(cfg).store.list("nodes")
    nodes = []
    for obj in items:
        md = obj["metadata"]
        status = obj.get("status") or {}
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": md["name"], "labels": dict(md.get("labels") or {}),
                         "annotations": {kwok_stages.NODE_ANNOTATION: kwok_stages.NODE_ANNOTATION_VALUE}},
            "spec": {k: v for k, v in (obj.get("spec") or {}).items() if k == "taints"},
            "status": {k: status[k] for k in ("capacity", "allocatable", "addresses") if k in status},
        })
    return nodes


def _webhook_configs(kustomization: Path, prefix: str, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """An upstream controller's webhook configurations (kustomize-built from ``kustomization``, with
    their patches), named ``<prefix>-<name>`` and pointed at the controller on 127.0.0.1 by URL
    instead of a Service (the LWS controller's; Kueue's, refcluster/kueue.py)."""
    from lwsflow.components.kustomize import kustomize_build

    ca = base64.b64encode(ca_pem).decode()
    docs = []
    for doc in kustomize_build(kustomization):
        if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        doc["metadata"] = {"name": f"{prefix}-{doc['metadata']['name']}"}
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
        docs.append(doc)
    return docs


def _crds() -> list[dict[str, Any]]:
    """The CRDs of the LWS module the controller is built from (v0.9.0; the upstream cache)."""
    try:
        crd_dir = paths.lws_crd_dir()
    except paths.UpstreamMissing as exc:
        raise OperationFailed(str(exc)) from exc
    files = sorted(crd_dir.glob("*.yaml"))
    if not files:
        raise OperationFailed(f"{crd_dir}: no CRDs (*.yaml)")
    return [d for f in files for d in load_yaml_documents(f)]


# -- up ----------------------------------------------------------------------------------------------
def _validate(opts: UpOptions) -> list[dict[str, Any]]:
    if not opts.ready_delay_s >= 0:
        raise InvalidInput(f"must be >= 0, got {opts.ready_delay_s:g}", field="--ready-delay")
    for pattern in opts.never_ready:
        if not pattern.strip():
            raise InvalidInput("an image pattern must not be empty", field="--never-ready")
    if opts.catalog is not None and not opts.catalog.is_file():
        raise InvalidInput(f"{opts.catalog}: no such file", field="--catalog")
    return _nodes(opts.catalog)  # loads (and so validates) the catalog before anything starts


def up(opts: UpOptions) -> Path:
    """Start a reference cluster in ``opts.state_dir``; returns the admin kubeconfig's path."""
    nodes = _validate(opts)
    bin_dir = binaries.require(kueue=opts.kueue)
    _crds()  # fetched from the upstream cache (or refused) before anything starts
    share = binaries.cache_dir() / "share" / "lws"
    state = opts.state_dir.resolve()
    if running(state):
        raise InvalidInput(f"a reference cluster is already up in {state} (lwsflow refcluster down)",
                           field="--state-dir")
    down(state)  # leftovers of a crashed start
    state.mkdir(parents=True, exist_ok=True)
    procs = _Procs(state, bin_dir)
    try:
        _start(opts, state, share, procs, nodes)
    except BaseException:
        _stop({n: p.pid for n, p in procs.started.items()}, bin_dir)
        for p in procs.started.values():
            with contextlib.suppress(Exception):
                p.wait(1)
        logs = state / "logs"
        keep = state.parent / f"{state.name}-failed-logs"
        if logs.exists():  # the logs are what explains a failed start: keep them next to the folder
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(logs, keep)
        shutil.rmtree(state, ignore_errors=True)
        raise
    return state / KUBECONFIG


def _start(opts: UpOptions, state: Path, share: Path, procs: _Procs, nodes: list[dict[str, Any]]) -> None:
    t0 = time.monotonic()
    deadline = t0 + opts.timeout_s
    say = opts.log
    pkid = state / "pki"
    ca, ca_key = pki.new_ca()
    serving = pki.serving_cert(ca, ca_key, "kube-apiserver")
    webhook = pki.serving_cert(ca, ca_key, "lws-webhook")
    sa_key, sa_pub = pki.service_account_keys()
    for name, data in (("ca.crt", ca.cert_pem), ("apiserver.crt", serving.cert_pem),
                       ("apiserver.key", serving.key_pem), ("sa.key", sa_key), ("sa.pub", sa_pub),
                       ("webhook/tls.crt", webhook.cert_pem), ("webhook/tls.key", webhook.key_pem)):
        _write_private(pkid / name, data)
    tokens = {u: secrets.token_urlsafe(32) for u in ("admin", "kcm", "scheduler", "kwok")}
    # user, uid, groups: kubeadm's identities for the control plane; kwok acts for every kubelet.
    identities = {"admin": ("lwsflow-admin", "system:masters"),
                  "kcm": ("system:kube-controller-manager", ""),
                  "scheduler": ("system:kube-scheduler", ""),
                  "kwok": ("kwok", "system:masters")}
    _write_private(state / "tokens.csv", "".join(
        f'{tokens[k]},{user},{k},"{groups}"\n' for k, (user, groups) in identities.items()))
    etcd_c, etcd_p, api, kcm, sched, kwok_port, hook, probe, kueue_hook, kueue_probe = _free_ports(10)
    url = f"https://127.0.0.1:{api}"
    kc = {k: _kubeconfig(state / "kubeconfigs" / k, url, tokens[k], ca.cert_pem) for k in tokens}

    etcd, log = procs.start("etcd", "etcd", [
        "--name=refcluster", f"--data-dir={state / 'etcd'}",
        f"--listen-client-urls=http://127.0.0.1:{etcd_c}", f"--advertise-client-urls=http://127.0.0.1:{etcd_c}",
        f"--listen-peer-urls=http://127.0.0.1:{etcd_p}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_p}",
        f"--initial-cluster=refcluster=http://127.0.0.1:{etcd_p}", "--unsafe-no-fsync", "--log-level=warn"])
    _wait("etcd", lambda: _http_ok(f"http://127.0.0.1:{etcd_c}/health"), deadline, etcd, log)
    say(f"etcd ready ({time.monotonic() - t0:.1f} s)")

    apiserver, log = procs.start("kube-apiserver", "kube-apiserver", [
        f"--etcd-servers=http://127.0.0.1:{etcd_c}", "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1", f"--secure-port={api}",
        f"--tls-cert-file={pkid / 'apiserver.crt'}", f"--tls-private-key-file={pkid / 'apiserver.key'}",
        f"--client-ca-file={pkid / 'ca.crt'}", f"--token-auth-file={state / 'tokens.csv'}",
        "--authorization-mode=RBAC", "--anonymous-auth=false",
        f"--service-account-issuer={SA_ISSUER}", f"--api-audiences={SA_ISSUER}",
        f"--service-account-key-file={pkid / 'sa.pub'}",
        f"--service-account-signing-key-file={pkid / 'sa.key'}",
        "--service-cluster-ip-range=10.96.0.0/16", "--allow-privileged=true",
        "--endpoint-reconciler-type=none", "--profiling=false", "--v=1"])
    ctx = ssl.create_default_context(cadata=ca.cert_pem.decode())
    _wait("kube-apiserver", lambda: _http_ok(f"{url}/readyz", ctx, tokens["admin"]), deadline, apiserver, log)
    say(f"kube-apiserver ready at {url} ({time.monotonic() - t0:.1f} s)")

    common = ["--bind-address=127.0.0.1", "--leader-elect=false"]
    procs.start("kube-controller-manager", "kube-controller-manager", [
        *common, f"--secure-port={kcm}", f"--kubeconfig={kc['kcm']}",
        f"--authentication-kubeconfig={kc['kcm']}", f"--authorization-kubeconfig={kc['kcm']}",
        "--use-service-account-credentials=true", f"--service-account-private-key-file={pkid / 'sa.key'}",
        f"--root-ca-file={pkid / 'ca.crt'}", "--v=1"])
    procs.start("kube-scheduler", "kube-scheduler", [
        *common, f"--secure-port={sched}", f"--kubeconfig={kc['scheduler']}",
        f"--authentication-kubeconfig={kc['scheduler']}", f"--authorization-kubeconfig={kc['scheduler']}",
        "--v=1"])
    stages = state / "kwok-stages.yaml"
    stages.write_text("".join(f"---\n{dump_yaml(d)}" for d in kwok_stages.stages(
        opts.ready_delay_s, list(opts.never_ready))))
    procs.start("kwok", "kwok", [
        f"--kubeconfig={kc['kwok']}", f"--config={stages}",
        f"--manage-nodes-with-annotation-selector={kwok_stages.NODE_ANNOTATION}="
        f"{kwok_stages.NODE_ANNOTATION_VALUE}",
        "--cidr=10.0.0.0/16", "--node-ip=10.255.0.1", "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{kwok_port}"])

    from lwsflow.controller.kube.client import Kube

    kube = Kube.connect(str(kc["admin"]))
    _install(kube, share, hook, ca.cert_pem, nodes)
    say(f"CRDs, RBAC and {len(nodes)} nodes installed ({time.monotonic() - t0:.1f} s)")

    token = kube.request("POST", f"/api/v1/namespaces/{LWS_NAMESPACE}/serviceaccounts/"
                         f"{LWS_SERVICE_ACCOUNT}/token",
                         body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                               "spec": {"audiences": [SA_ISSUER], "expirationSeconds": 7 * 86400}})
    lws_kc = _kubeconfig(state / "kubeconfigs" / "lws", url, token["status"]["token"], ca.cert_pem)
    lws_cfg = state / "lws-config.yaml"
    lws_cfg.write_text(dump_yaml({
        "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},  # certificates come from this launcher's CA
        "webhook": {"host": "127.0.0.1", "port": hook, "certDir": str(pkid / "webhook")},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe}"}}))
    lws, log = procs.start("lws-controller", "lws-controller",
                           [f"--config={lws_cfg}", "--leader-elect=false"], env={"KUBECONFIG": str(lws_kc)})
    _wait("lws-controller webhooks", lambda: _tls_listening(hook), deadline, lws, log)
    _wait("lws-controller", lambda: _http_ok(f"http://127.0.0.1:{probe}/readyz"), deadline, lws, log)
    for doc in _webhook_configs(share / "webhook", "lws", hook, ca.cert_pem):
        _create(kube, doc)
    say(f"lws-controller ready ({time.monotonic() - t0:.1f} s)")

    _wait("nodes Ready", lambda: _all_nodes_ready(kube, len(nodes)), deadline, None,
          state / "logs" / "kwok.log")
    _wait("default ServiceAccount", lambda: bool(
        kube.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")), deadline, None,
        state / "logs" / "kube-controller-manager.log")
    _wait("LWS webhook admission", lambda: _webhook_admits(kube), deadline, lws, log)
    if opts.kueue:
        from lwsflow.rehearsal.refcluster import kueue

        kueue.start(kube, procs, state, url, ca, ca_key, (kueue_hook, kueue_probe), deadline)
        say(f"kueue ready ({time.monotonic() - t0:.1f} s)")
    _kubeconfig(state / KUBECONFIG, url, tokens["admin"], ca.cert_pem)
    say(f"up in {time.monotonic() - t0:.1f} s")


_PATHS = {
    "Namespace": "/api/v1/namespaces", "Node": "/api/v1/nodes",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "MutatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
}


def _binding(kind: str, role: str, account: str, namespace: str) -> dict[str, Any]:
    """A ``<kind>Binding`` named ``<role>binding`` giving ``role`` to ServiceAccount ``namespace/account``
    (a RoleBinding in ``namespace``)."""
    meta: dict[str, Any] = {"name": f"{role}binding"}
    if kind == "Role":
        meta["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]}


def _create(kube: Any, obj: dict[str, Any], path: str | None = None) -> None:
    with contextlib.suppress(Conflict):  # AlreadyExists: a retried request that had gone through
        kube.request("POST", path or _PATHS[obj["kind"]], body=obj)


def _install(kube: Any, share: Path, hook_port: int, ca_pem: bytes, nodes: list[dict[str, Any]]) -> None:
    for crd in _crds():
        _create(kube, crd)
    _create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LWS_NAMESPACE}})
    _create(kube, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": LWS_SERVICE_ACCOUNT}},
            f"/api/v1/namespaces/{LWS_NAMESPACE}/serviceaccounts")
    role = load_yaml_documents(share / "rbac-role.yaml")[0]
    role["metadata"] = {"name": "lws-manager-role"}
    _create(kube, role)
    _create(kube, _binding("ClusterRole", "lws-manager-role", LWS_SERVICE_ACCOUNT, LWS_NAMESPACE))
    for node in nodes:
        _create(kube, node)
    for crd in _crds():
        name = crd["metadata"]["name"]
        _wait_crd(kube, name)


def _wait_crd(kube: Any, name: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        obj = kube.request("GET", f"{_PATHS['CustomResourceDefinition']}/{name}")
        conds = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
        if conds.get("Established") == "True":
            return
        time.sleep(0.1)
    raise OperationFailed(f"CRD {name} not Established in time")


def _all_nodes_ready(kube: Any, want: int) -> bool:
    items = kube.request("GET", "/api/v1/nodes").get("items") or []
    ready = [n for n in items if any(c["type"] == "Ready" and c["status"] == "True"
                                     for c in (n.get("status") or {}).get("conditions") or [])]
    return len(ready) >= want


_PROBE_LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
    "metadata": {"name": "lwsflow-admission-probe"},
    "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
        "spec": {"containers": [{"name": "c", "image": "probe"}]}}}},
}


def _webhook_admits(kube: Any) -> bool:
    """A server-side dry run of a tiny LWS: true once the mutating and validating webhooks answer."""
    try:
        out = kube.request("POST", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets",
                           body=_PROBE_LWS, query={"dryRun": "All"})
    except (ApiError, NotFound):
        return False
    # the mutating webhook (not the CRD schema) defaults the subdomain policy: proof it ran
    return bool(((out.get("spec") or {}).get("networkConfig") or {}).get("subdomainPolicy"))
