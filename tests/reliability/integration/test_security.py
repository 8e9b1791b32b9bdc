"""Security properties, checked on real output: planted secrets never surface, rendered pods are
unprivileged, prod runs digests only, every server binds loopback, the embedded API wants its token.

Canaries: each test plants a unique secret VALUE where a secret legitimately lives (process
environment for credentials, the stand-in engine's API key, a Secret referenced by the catalog) and
scans everything the step produced (files, stdout, stderr, JSON reports, compiled pipelines) for it.
The Secret *names* and keys referenced by ``secretKeyRef`` are not secrets and must still appear.
"""

from __future__ import annotations

import json
import secrets
import shlex
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import given, settings

from reliability.cli_harness import (
    assert_refused,
    run_cli,
    tree_bytes,
    write_yaml,
)
from reliability.strategies import CAMPAIGN, REPO, example_catalog_doc, valid_catalogs

CREDENTIAL_ENV = ("HF_TOKEN", "GIT_USERNAME", "GIT_PASSWORD", "REGISTRY_USERNAME", "REGISTRY_PASSWORD",
                  "LWSFLOW_API_TOKEN", "OPENAI_API_KEY")


def canary() -> str:
    return f"canary-{secrets.token_hex(12)}"


def occurrences(value: str, *texts: str | bytes) -> int:
    return sum((t.decode(errors="replace") if isinstance(t, bytes) else t).count(value) for t in texts)


def tree_text(root: Path) -> list[bytes]:
    return list(tree_bytes(root).values()) if root.exists() else []


# -- planted secrets -----------------------------------------------------------------------------------


def test_render_and_friends_carry_secret_references_never_values(tmp_path: Path) -> None:
    value = canary()
    doc = example_catalog_doc()
    doc["models"][0]["env"].append({"name": "OPENAI_API_KEY",
                                    "secretKeyRef": {"name": "openai-credentials", "key": "api-key"}})
    catalog = write_yaml(tmp_path / "catalog.yaml", doc)
    out = tmp_path / "overlays"
    env = dict.fromkeys(CREDENTIAL_ENV, value)

    commands = (["plan", catalog, "--json"], ["render", catalog, "--out", out], ["validate", out],
                ["build-overlays", out, "--json"])
    results = [run_cli(argv, env=env) for argv in commands]

    assert [r.code for r in results] == [0, 0, 0, 0], [r.err for r in results]
    rendered = tree_text(out)
    assert occurrences(value, *rendered, *(r.text for r in results)) == 0
    joined = b"".join(rendered)
    assert b"openai-credentials" in joined and b"hf-token" in joined  # the references are there
    assert joined.count(b"secretKeyRef") >= 2


@pytest.mark.parametrize("where", ["env-literal", "extra-arg", "extra-arg-equals"])
def test_secret_literal_in_catalog_is_refused_without_echoing_it(where: str, tmp_path: Path) -> None:
    value = canary()
    doc = example_catalog_doc()
    if where == "env-literal":
        doc["models"][0]["env"].append({"name": "OPENAI_API_KEY", "value": value})
    elif where == "extra-arg":
        doc["models"][0]["extraArgs"] = ["--api-key", value]
    else:
        doc["models"][0]["extraArgs"] = [f"--api-key={value}"]
    catalog = write_yaml(tmp_path / "catalog.yaml", doc)
    out = tmp_path / "overlays"

    res = run_cli(["render", catalog, "--out", out])

    assert_refused(res, "env" if where == "env-literal" else "extraArgs")
    assert occurrences(value, res.text) == 0
    assert not out.exists()


@pytest.fixture
def engine_with_key() -> Iterator[tuple[str, str]]:
    from lwsflow.sim.engine import start_engine

    key = canary()
    with start_engine(api_key=key) as handle:
        yield handle.url, key


@pytest.mark.parametrize("right_token", [True, False], ids=["accepted", "rejected"])
def test_smoke_bearer_token_never_surfaces(right_token: bool, engine_with_key: tuple[str, str],
                                           tmp_path: Path) -> None:
    url, key = engine_with_key
    token = key if right_token else canary()
    report = tmp_path / "smoke.json"

    res = run_cli(["smoke", "--url", url, "--token-env", "SMOKE_TOKEN", "--no-placement", "--json",
                   "--report", report, "--warmup", "1", "--deadline", "20", "--retries", "1"],
                  env={"SMOKE_TOKEN": token})

    assert res.code == (0 if right_token else 1), res.err
    assert json.loads(report.read_text())  # a real report was written and scanned
    assert occurrences(token, res.text, report.read_bytes()) == 0
    assert occurrences(key, res.text, report.read_bytes()) == 0


def test_git_and_registry_credentials_stay_out_of_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from lwsflow.components import gitwork, images
    from lwsflow.controller.errors import OperationFailed

    value = canary()
    for name in CREDENTIAL_ENV:
        monkeypatch.setenv(name, value)
    closed = _closed_port()
    with_password = f"http://lwsflow:{value}@127.0.0.1:{closed}/r.git"
    messages = []
    for call in (lambda: gitwork.git("ls-remote", f"http://127.0.0.1:{closed}/repo.git", timeout=10),
                 lambda: gitwork.git("ls-remote", with_password, timeout=10),
                 lambda: images.check_registry(f"127.0.0.1:{closed}", timeout=2)):
        with pytest.raises(OperationFailed) as err:
            call()
        messages.append(str(err.value))

    assert len(messages) == 3 and occurrences(value, *messages) == 0


def test_compiled_pipelines_take_credentials_from_secrets_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from lwsflow.components.catalog import looks_secret
    from lwsflow.pipelines.compile import argo_manifest

    value = canary()
    for name in CREDENTIAL_ENV:
        monkeypatch.setenv(name, value)
    assert occurrences(value, yaml.safe_dump(argo_manifest())) == 0

    dist = sorted((REPO / "pipelines" / "dist").glob("*.yaml"))
    assert dist, "the compiled pipelines are committed under pipelines/dist"
    secret_envs = 0
    for path in dist:
        for doc in yaml.safe_load_all(path.read_text()):
            for env in _walk_env(doc):
                if looks_secret(str(env.get("name", ""))):
                    secret_envs += 1
                    assert "value" not in env, f"{path.name}: {env['name']} has a literal value"
                    assert "secretKeyRef" in (env.get("valueFrom") or {}), f"{path.name}: {env['name']}"
    assert secret_envs > 0  # the scan saw the credentials the pipeline does use


def _walk_env(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "env" and isinstance(v, list):
                yield from (e for e in v if isinstance(e, dict))
            else:
                yield from _walk_env(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk_env(v)


def test_sim_serve_writes_its_token_only_to_a_private_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"

    res = run_cli(["sim", "serve", "--duration", "0.1", "--kubeconfig", kubeconfig])

    assert res.code == 0, res.err
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    assert len(token) >= 32 and occurrences(token, res.text) == 0
    assert kubeconfig.stat().st_mode & 0o777 == 0o600


# -- rendered pods -------------------------------------------------------------------------------------


def pod_specs(obj: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec inside an object (LWS leader/worker templates, DS roles, anything nested)."""
    if isinstance(obj, dict):
        if isinstance(obj.get("containers"), list):
            yield obj
        for v in obj.values():
            yield from pod_specs(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from pod_specs(v)


def pod_security_problems(objs: list[dict[str, Any]]) -> list[str]:
    problems = []
    for obj in objs:
        where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        for spec in pod_specs(obj):
            for flag in ("hostNetwork", "hostPID", "hostIPC"):
                if spec.get(flag):
                    problems.append(f"{where}: {flag}")
            # no engine documents a hostPath need (model weights come from a PVC or emptyDir)
            problems += [f"{where}: hostPath volume {v.get('name')}" for v in spec.get("volumes") or []
                         if "hostPath" in v]
            for c in [*spec["containers"], *(spec.get("initContainers") or [])]:
                sc = c.get("securityContext") or {}
                if sc.get("privileged"):
                    problems.append(f"{where}: container {c.get('name')} privileged")
                if sc.get("allowPrivilegeEscalation") is not False:
                    problems.append(f"{where}: container {c.get('name')} may escalate privileges")
                caps = (sc.get("capabilities") or {}).get("add") or []
                problems += [f"{where}: container {c.get('name')} adds {cap}" for cap in caps]
    return problems


def _rendered_objects(doc: dict[str, Any]) -> list[dict[str, Any]]:
    from lwsflow.components.catalog import parse_catalog
    from lwsflow.components.manifests import render_catalog

    cat = parse_catalog(doc)
    return [o for env in (None, *(e.name for e in cat.environments))
            for objs in render_catalog(cat, env).values() for o in objs]


def test_example_catalog_pods_are_unprivileged() -> None:
    objs = _rendered_objects(example_catalog_doc())
    assert sum(1 for o in objs for _ in pod_specs(o)) >= 10
    assert pod_security_problems(objs) == []


def test_committed_overlays_pods_are_unprivileged() -> None:
    objs = [d for p in sorted((REPO / "overlays" / "base").rglob("*.yaml"))
            for d in yaml.safe_load_all(p.read_text()) if isinstance(d, dict)]
    assert any(o.get("kind") == "LeaderWorkerSet" for o in objs)
    assert pod_security_problems(objs) == []


@settings(CAMPAIGN, max_examples=20)
@given(doc=valid_catalogs())
def test_generated_catalog_pods_are_unprivileged(doc: dict[str, Any]) -> None:
    assert pod_security_problems(_rendered_objects(doc)) == []


def test_detector_sees_a_privileged_pod() -> None:
    """The scanner itself: a pod with every forbidden setting is reported on each count."""
    bad = {"kind": "LeaderWorkerSet", "metadata": {"name": "x"}, "spec": {"template": {
        "hostNetwork": True, "hostPID": True, "hostIPC": True, "volumes": [{"name": "h", "hostPath": {}}],
        "containers": [{"name": "c", "securityContext": {"privileged": True,
                                                         "capabilities": {"add": ["SYS_ADMIN"]}}}]}}}
    assert len(pod_security_problems([bad])) == 7


def test_multi_node_launch_quotes_catalog_values_for_the_shell(tmp_path: Path) -> None:
    """405B runs through ``/bin/sh -c``: hostile model ids and extra args stay single arguments."""
    from lwsflow.components.catalog import parse_catalog
    from lwsflow.components.manifests import render_model

    hostile = ["--served-model-name", "x; touch /tmp/pwned", "$(id)", "`id`", "a'b", "--x=\"$HOME\""]
    doc = example_catalog_doc()
    doc["models"][2]["extraArgs"] = hostile
    lws = render_model(parse_catalog(doc), "llama-405b")[0]
    container = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert container["command"][:2] == ["/bin/sh", "-c"]

    words = shlex.split(container["args"][0])

    served = words.index("serve")
    assert words[served + 1:][-len(hostile) - 2:-2] == hostile  # before the executor-backend flag pair


# -- production images ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tree", ["committed", "rendered"])
def test_prod_overlay_images_are_digests_only(tree: str, tmp_path: Path) -> None:
    """The shipped ``overlays/prod`` and a fresh render of the example catalog, built by kustomize."""
    from lwsflow.components.kustomize import build_overlays

    out = REPO / "overlays"
    if tree == "rendered":
        out = tmp_path / "overlays"
        assert run_cli(["render", REPO / "examples" / "catalog.yaml", "--out", out]).code == 0

    images = [c["image"] for r in build_overlays(out, "prod") for o in r.objects for s in pod_specs(o)
              for c in [*s["containers"], *(s.get("initContainers") or [])]]

    assert images and all("@sha256:" in i and len(i.rsplit("@sha256:", 1)[1]) == 64 for i in images)


def test_prod_never_runs_a_tag_only_image(tmp_path: Path) -> None:
    """A tag-only image renders (dev runs it) but prod holds the model out until a digest is pinned."""
    from lwsflow.components.kustomize import build_overlays

    doc = example_catalog_doc()
    doc["models"][0]["image"] = "vllm/vllm-openai:latest"
    catalog = write_yaml(tmp_path / "catalog.yaml", doc)
    out = tmp_path / "overlays"
    assert run_cli(["render", catalog, "--out", out]).code == 0

    images = [c["image"] for r in build_overlays(out, "prod") for o in r.objects for s in pod_specs(o)
              for c in [*s["containers"], *(s.get("initContainers") or [])]]
    assert images and all("@sha256:" in i for i in images)
    held = [r.path for r in build_overlays(out, "prod") if r.held]
    assert held == [f"prod/{doc['models'][0]['name']}"]


# -- servers bind loopback -----------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening_addresses(port: int) -> set[str]:
    """Addresses with a socket LISTENing on ``port`` (from /proc/net/tcp{,6}, any process)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            addr, hexport = fields[1].split(":")
            if fields[3] != "0A" or int(hexport, 16) != port:
                continue
            raw = bytes.fromhex(addr)
            if width == 8:
                found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
            else:  # four little-endian 32-bit words
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


def assert_loopback_only(port: int) -> None:
    found = listening_addresses(port)
    assert found, f"nothing listens on port {port}"
    assert all(a.startswith("127.") or a == "::1" for a in found), found


def test_embedded_api_server_binds_loopback_by_default() -> None:
    from lwsflow.sim.apiserver import ApiServer
    from lwsflow.sim.store import Store

    with ApiServer(Store()) as api:
        assert api.host == "127.0.0.1"
        assert_loopback_only(api.port)


def test_stand_in_engine_binds_loopback_by_default() -> None:
    from lwsflow.sim.engine import start_engine

    with start_engine() as agg, start_engine(role="prefill") as prefill:
        assert_loopback_only(agg.port)
        assert_loopback_only(prefill.port)
        side = prefill.engine.side_channel  # the prefill KV hand-off port
        assert side is not None
        assert_loopback_only(side.port)


def test_local_registry_binds_loopback() -> None:
    from lwsflow.components.images import LocalRegistry

    with LocalRegistry() as reg:
        assert_loopback_only(reg.port)


def test_cli_servers_bind_loopback_by_default(tmp_path: Path) -> None:
    """`lwsflow engine-stub` and `lwsflow sim serve` started as a user would, with default flags."""
    lwsflow = str(Path(sys.executable).parent / "lwsflow")
    kubeconfig = tmp_path / "kc"
    procs = [subprocess.Popen([lwsflow, "engine-stub", "--port", "0", "--exit-after", "20"],
                              stdout=subprocess.PIPE, text=True),
             subprocess.Popen([lwsflow, "sim", "serve", "--kubeconfig", str(kubeconfig), "--duration", "20"],
                              stdout=subprocess.PIPE, text=True)]
    try:
        ports = []
        for proc in procs:
            line = _first_line(proc, deadline_s=20)
            ports.append(int(line.split("127.0.0.1:", 1)[1].split()[0].split("/")[0].rstrip(")")))
        for port in ports:
            assert_loopback_only(port)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def _first_line(proc: subprocess.Popen[str], deadline_s: float) -> str:
    assert proc.stdout is not None
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(deadline_s)
    assert box and "127.0.0.1:" in box[0], f"no serving line within {deadline_s}s: {box}"
    return box[0]


# -- the embedded API wants the kubeconfig's token -----------------------------------------------------


def test_embedded_api_refuses_requests_without_the_token(tmp_path: Path) -> None:
    from lwsflow.sim.apiserver import ApiServer
    from lwsflow.sim.store import Store

    token = canary()
    with ApiServer(Store(), token=token) as api:
        kubeconfig = yaml.safe_load(api.write_kubeconfig(tmp_path / "kc").read_text())
        assert kubeconfig["users"][0]["user"]["token"] == token
        assert api.base_url.startswith("https://")
        ca = tmp_path / "ca.pem"
        ca.write_bytes(api.ca_pem or b"")
        ctx = ssl.create_default_context(cafile=str(ca))
        url = f"{api.base_url}/api/v1/namespaces/default/pods"
        with httpx.Client(verify=ctx, timeout=5) as client:
            answers = {
                "none": client.get(url),
                "wrong": client.get(url, headers={"Authorization": f"Bearer {canary()}"}),
                "basic": client.get(url, headers={"Authorization": f"Basic {token}"}),
                "prefix": client.get(url, headers={"Authorization": f"Bearer {token[:-1]}"}),
                "right": client.get(url, headers={"Authorization": f"Bearer {token}"}),
            }
    codes = {k: r.status_code for k, r in answers.items()}
    assert codes == {"none": 401, "wrong": 401, "basic": 401, "prefix": 401, "right": 200}
    assert all(occurrences(token, r.text) == 0 for r in answers.values())


def test_sim_serve_always_sets_a_token(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    done = threading.Event()
    result: list[Any] = []

    def serve() -> None:
        result.append(run_cli(["sim", "serve", "--kubeconfig", kubeconfig, "--duration", "2"]))
        done.set()

    threading.Thread(target=serve, daemon=True).start()
    deadline = time.monotonic() + 10
    while not kubeconfig.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    config = yaml.safe_load(kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    assert server.startswith("https://127.0.0.1:")
    answer = httpx.get(f"{server}/api/v1/nodes", verify=False, timeout=5)
    assert answer.status_code == 401
    assert done.wait(15) and result[0].code == 0


# -- RBAC wiring (the used-vs-granted comparison is tests/rollout/integration/test_rbac.py) ------------

DANGEROUS_VERBS = {"*", "escalate", "bind", "impersonate", "deletecollection"}
SENSITIVE_RESOURCES = {"*", "secrets", "pods/exec", "pods/attach", "pods/portforward",
                       "serviceaccounts/token", "roles", "rolebindings", "clusterroles",
                       "clusterrolebindings"}


def test_shipped_rbac_binds_only_the_controller_and_grants_nothing_sensitive() -> None:
    docs = {d["kind"]: d for p in sorted((REPO / "overlays" / "rbac").glob("*.yaml"))
            for d in yaml.safe_load_all(p.read_text()) if isinstance(d, dict)}
    role, binding, account = docs["ClusterRole"], docs["ClusterRoleBinding"], docs["ServiceAccount"]

    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]
    granted = [(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]]
    assert granted and "aggregationRule" not in role
    assert all("nonResourceURLs" not in rule and "resourceNames" not in rule for rule in role["rules"])
    assert not [t for t in granted if t[2] in DANGEROUS_VERBS or t[1] in SENSITIVE_RESOURCES or t[0] == "*"]
    # the workloads themselves are never created or deleted by the controller: GitOps owns them
    assert not [t for t in granted if t[1] in ("leaderworkersets", "disaggregatedsets")
                and t[2] in ("create", "delete", "update")]
