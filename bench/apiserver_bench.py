"""`kubectl get lws` with 500 LeaderWorkerSets over HTTP: latency of the real kubectl and of the raw call.

Run: ``.venv/bin/python bench/apiserver_bench.py [--objects 500] [--runs 5]``. Prints the median and
the best wall time of the full kubectl process (discovery cache warm), of the server-side Table
list alone (one HTTPS request, what kubectl asks for), and of one small GET with the admin token and
with a ServiceAccount token authorised by RBAC among 100 other bindings (the authorisation cost).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lwsflow.controller.api.defaults import default_object  # noqa: E402
from lwsflow.controller.api.paths import lws_file  # noqa: E402
from lwsflow.controller.yamlio import load_yaml_documents  # noqa: E402
from lwsflow.sim.apiserver import ApiServer  # noqa: E402
from lwsflow.sim.store import Store  # noqa: E402

KUBECTL = Path(sys.executable).parent / "kubectl"
SAMPLE = lws_file("config/samples/leaderworkerset_v1_leaderworkerset.yaml")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--objects", type=int, default=500)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    store = Store()
    base = default_object(load_yaml_documents(SAMPLE)[0])
    for i in range(args.objects):
        obj = copy.deepcopy(base)
        obj["metadata"]["name"] = f"lws-{i:04d}"
        store.create("leaderworkersets.leaderworkerset.x-k8s.io", obj)
    with tempfile.TemporaryDirectory() as d, ApiServer(store, token="bench") as api:
        kc = api.write_kubeconfig(Path(d) / "kubeconfig")
        cmd = [str(KUBECTL), "--kubeconfig", str(kc), "--cache-dir", f"{d}/cache", "get", "lws"]
        subprocess.run(cmd, check=True, capture_output=True)  # warm kubectl's discovery cache
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            times.append(time.perf_counter() - t0)
        rows = len(out.splitlines()) - 1
        assert rows == args.objects, f"kubectl printed {rows} rows, expected {args.objects}"
        raw = _raw_table_times(api, args.runs)
        admin_get, sa_get = _get_times(api, store, "bench"), _get_times(api, store, _sa_token(api, store))
    print(
        f"kubectl get lws, {args.objects} objects over HTTPS: "
        f"median {statistics.median(times) * 1000:.0f} ms, "
        f"best {min(times) * 1000:.0f} ms ({args.runs} runs, discovery cache warm)"
    )
    print(
        f"server-side Table list alone: median {statistics.median(raw) * 1000:.0f} ms, "
        f"best {min(raw) * 1000:.0f} ms"
    )
    print(
        f"one GET, 200 runs: admin token median {statistics.median(admin_get) * 1000:.2f} ms; "
        f"ServiceAccount token through RBAC median {statistics.median(sa_get) * 1000:.2f} ms"
    )


def _sa_token(api: ApiServer, store: Store) -> str:
    """A ServiceAccount bound by the last of 101 ClusterRoleBindings (100 bind other subjects)."""
    if store.try_get("namespaces", "", "bench") is None:
        store.create("namespaces", {"metadata": {"name": "bench"}})
    sa = store.create("serviceaccounts", {"metadata": {"name": "reader", "namespace": "bench"}})
    store.create("clusterroles.rbac.authorization.k8s.io", {"metadata": {"name": "reader"}, "rules": [
        {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"], "verbs": ["get"]}]})
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"}
    for i in range(101):
        who = "reader" if i == 100 else f"other-{i}"
        store.create("clusterrolebindings.rbac.authorization.k8s.io", {
            "metadata": {"name": f"b-{i:03d}"}, "roleRef": ref,
            "subjects": [{"kind": "ServiceAccount", "name": who, "namespace": "bench"}]})
    return api.auth.mint(sa, api.clock() + 3600)


def _get_times(api: ApiServer, store: Store, token: str, runs: int = 200) -> list[float]:
    import http.client
    import ssl

    ctx = ssl.create_default_context(cadata=(api.ca_pem or b"").decode())
    conn = http.client.HTTPSConnection(api.host, api.port, context=ctx, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        conn.request("GET", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets/lws-0000",
                     headers=headers)
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200, resp.status
        out.append(time.perf_counter() - t0)
    conn.close()
    return out


def _raw_table_times(api: ApiServer, runs: int) -> list[float]:
    import http.client
    import ssl

    ctx = ssl.create_default_context(cadata=(api.ca_pem or b"").decode())
    conn = http.client.HTTPSConnection(api.host, api.port, context=ctx, timeout=30)
    headers = {
        "Authorization": "Bearer bench",
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    }
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        conn.request(
            "GET",
            "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets?limit=500",
            headers=headers,
        )
        resp = conn.getresponse()
        resp.read()
        out.append(time.perf_counter() - t0)
    conn.close()
    return out


if __name__ == "__main__":
    main()
