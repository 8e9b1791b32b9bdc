"""overlays/controller's RBAC, enforced: `lwsflow controller run --leader-elect` as its own process
with only the controller ServiceAccount's token (TokenRequest API through `lwsflow sim token`), every
request authorised by the shipped ClusterRole/Role through the embedded cluster's RBAC (no admin
token in the controller). kube-apiserver answers a request no rule allows with 403 Forbidden."""

from __future__ import annotations

import base64
import contextlib
import io
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from pathlib import Path

from markupsafe import escape

from lwsflow.cli import kubectl_plugin
from lwsflow.controller.kube.resources import EVENT, LWS, ROLLOUT_POLICY, SECRET
from lwsflow.controller.rollout import gate
from lwsflow.dashboard.cache import Cache
from lwsflow.dashboard.pages import Renderer
from reliability.http_sink import Sink
from reliability.incluster_env import SYSTEM_NS, install_rbac, policy, sync, wait_policy
from reliability.ports import ReservedPort
from reliability.rollout_env import NS, Env, lws_manifest
from tests.rollout.rbac_kit import ANALYSIS, every_check, served, service_for, serving

# the stand-in engines' port: from the kernel, held while this test process runs (reliability/ports.py)
_ENGINE_PORT = ReservedPort()
__all__ = ["served"]  # the fixture, from rbac_kit


@contextlib.contextmanager
def controller_process(kubeconfig: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`lwsflow controller run` as the Deployment runs it (leader election on a Lease in its own
    namespace), with the ServiceAccount's kubeconfig only."""
    lwsflow = Path(sys.executable).parent / "lwsflow"
    env = {**os.environ, "LWSFLOW_LOG": "text"}
    env.pop("KUBECONFIG", None)
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [str(lwsflow), "controller", "run", "-n", NS, "--leader-elect", f"--lease-namespace={SYSTEM_NS}",
             "--lease-duration=3s", "--resync=1s", "--cluster-clock", "--metrics-addr=127.0.0.1:0",
             "--health-addr=127.0.0.1:0", f"--kubeconfig={kubeconfig}"],
            stdout=sink, stderr=subprocess.STDOUT, env=env)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_or_log(env: Env, log: Path, pred: Callable[[dict], bool], timeout: float) -> dict:
    try:
        return wait_policy(env, "m", pred, timeout=timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\ncontroller log:\n{log.read_text()}") from None


def test_staged_rollout_with_only_the_controller_service_account(env: Env, tmp_path: Path) -> None:
    """The shipped RBAC is sufficient: the controller process takes the Lease, adopts the running
    template, stages the synced one 1 → 100% and the policy ends Succeeded, with no 403 logged."""
    env.create_ready(lws_manifest("m", replicas=2, partition=2))
    env.kube.create(ROLLOUT_POLICY, NS, policy("m", "m", [{"groups": 1}, {"groups": "100%"}],
                                               progressDeadline="2m"))
    sa = install_rbac(env, tmp_path)
    log = tmp_path / "controller.log"
    with controller_process(sa, log) as proc:
        wait_or_log(env, log, lambda s: bool(s.get("stableRevision")), timeout=60)
        sync(env, "m", "vllm:2")
        done = wait_or_log(env, log, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed"),
                           timeout=120)
        assert proc.poll() is None, log.read_text()
        # the Lease in the controller's namespace (the Role), held by the process
        lease = env.kube.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NS}/leases/"
                                        "lwsflow-controller")
        assert lease["spec"].get("holderIdentity"), lease
    text = log.read_text()
    assert done["status"]["phase"] == "Succeeded", text
    assert done["status"]["stages"] == 2, done["status"]
    live = env.kube.get(LWS, NS, "m")
    # every group on the new template, the partition back at replicas (frozen for the next sync)
    assert live["status"]["updatedReplicas"] == 2 and gate.partition(live) == 2, live["status"]
    worker = live["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["spec"]["containers"][0]["image"] == "vllm:2"
    assert "became leader" in text and "orbidden" not in text and "Traceback" not in text, text


def test_a_missing_verb_is_a_403_in_one_log_line_and_the_rollout_does_not_move(env: Env,
                                                                               tmp_path: Path) -> None:
    """Without `patch` on leaderworkersets the controller can neither adopt the running template nor
    start the staged rollout of a synced one: the API server's 403 in one WARNING line naming the
    ServiceAccount, the verb and the resource, retried on every pass; the synced template stays
    frozen (partition = replicas) and no rollout state is written on the target."""
    env.create_ready(lws_manifest("m", replicas=2, partition=2))
    env.kube.create(ROLLOUT_POLICY, NS, policy("m", "m", [{"groups": 1}, {"groups": "100%"}],
                                               progressDeadline="2m"))
    sa = install_rbac(env, tmp_path, drop=("leaderworkersets", "patch"))
    log = tmp_path / "controller.log"
    forbidden = ('403 Forbidden: leaderworkersets.leaderworkerset.x-k8s.io "m" is forbidden: User '
                 f'"system:serviceaccount:{SYSTEM_NS}:lwsflow-controller" cannot patch resource '
                 f'"leaderworkersets" in API group "leaderworkerset.x-k8s.io" in the namespace "{NS}"')
    with controller_process(sa, log) as proc:
        # the first write it needs (adopting the running template as stable) is refused already
        _wait_for_line(log, forbidden)
        sync(env, "m", "vllm:2")
        seen = log.read_text().count(forbidden)
        _wait_for_line(log, forbidden, after=seen)  # the synced template: refused again, on every pass
        assert proc.poll() is None, log.read_text()  # a 403 is logged and retried, not a crash
    lines = [ln for ln in log.read_text().splitlines() if "403 Forbidden" in ln]
    assert lines, log.read_text()
    assert lines[0].startswith("WARNING ") and lines[0].endswith(forbidden), lines[0]
    assert "Traceback" not in log.read_text()
    live = env.kube.get(LWS, NS, "m")
    assert gate.partition(live) == 2
    assert not [k for k in live["metadata"].get("annotations", {}) if k.startswith("rollout.lwsflow.io/")]
    status = env.kube.get(ROLLOUT_POLICY, NS, "m")["status"]
    assert status.get("phase") not in ("Progressing", "Succeeded"), status
    assert not status.get("stableRevision"), status


def _wait_for_line(log: Path, line: str, *, after: int = 0, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while log.read_text().count(line) <= after:
        assert time.monotonic() < end, f"no {line!r} in the controller log:\n{log.read_text()}"
        time.sleep(0.1)


def test_every_check_and_hook_with_only_the_shipped_roles(served: Env, tmp_path: Path) -> None:
    """A policy naming every check kind (smoke, http, command), an analysis and notifications, run by
    the controller process with only the ServiceAccount's token, bound to overlays/controller's roles
    and, in the policy's namespace, overlays/controller/notifications' Role (what docs/controller.md
    tells an operator to apply): Succeeded, no 403 anywhere, the webhook's URL read from its Secret."""
    env = served
    port = _ENGINE_PORT.port
    env.create_ready(serving("m", port, replicas=2, partition=2))
    service_for(env, "m", port)
    sink = Sink()
    env.kube.create(SECRET, NS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook"},
                                 "data": {"url": base64.b64encode(f"{sink.url}/hook".encode()).decode()}})
    env.kube.create(ROLLOUT_POLICY, NS, policy(
        "m", "m", [{"groups": 1, "checks": every_check(sink.url)}, {"groups": "100%"}],
        analysis=ANALYSIS, notifications={"webhooks": [{"secretKeyRef": {"name": "hook", "key": "url"}}]}))
    sa = install_rbac(env, tmp_path, notifications=NS)
    log = tmp_path / "controller.log"
    try:
        with controller_process(sa, log) as proc:
            wait_or_log(env, log, lambda s: bool(s.get("stableRevision")), timeout=60)
            sync(env, "m", "vllm:2")
            done = wait_or_log(env, log, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed"),
                               timeout=120)
            end = time.monotonic() + 30
            while not any(b"succeeded" in p for p in sink.posts):  # the webhook thread posts after the status
                assert time.monotonic() < end and proc.poll() is None, log.read_text()
                time.sleep(0.05)
    finally:
        sink.close()
    text = log.read_text()
    assert done["status"]["phase"] == "Succeeded", (done["status"], text)
    assert "orbidden" not in text and "Traceback" not in text, text


def test_a_check_refused_by_rbac_fails_with_the_api_servers_words(served: Env, tmp_path: Path) -> None:
    """The smoke check's placement reads each pod's node (``list`` with a name field selector); with
    that verb taken out of the role the check fails, and every place that says why the release was
    rolled back carries the cause in the API server's words (403, the verb and the object), not only
    the check's name: status.message, the Warning Events on the policy, the controller's log and
    `kubectl lwsflow status`."""
    env = served
    port = _ENGINE_PORT.port
    env.create_ready(serving("m", port, replicas=2, partition=2))
    env.kube.create(ROLLOUT_POLICY, NS, policy("m", "m", [{"groups": 1, "checks": [{"smoke": {}}]},
                                                          {"groups": "100%"}]))
    sa = install_rbac(env, tmp_path, drop=("nodes", "list"))
    log = tmp_path / "controller.log"
    with controller_process(sa, log):
        wait_or_log(env, log, lambda s: bool(s.get("stableRevision")), timeout=60)
        sync(env, "m", "vllm:2")
        done = wait_or_log(env, log, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed"),
                           timeout=120)
    cause = (f'403 Forbidden: nodes is forbidden: User "system:serviceaccount:{SYSTEM_NS}:lwsflow-controller"'
             ' cannot list resource "nodes" in API group "" at the cluster scope')
    message = done["status"]["message"]
    assert done["status"]["phase"] == "RolledBack", done["status"]
    assert "smoke failed: placement@lws/m: cannot read node " in message and cause in message, message
    events = {e["reason"]: e for e in env.kube.list(EVENT, NS)[0]
              if e["involvedObject"].get("kind") == "RolloutPolicy"}
    for reason in ("CheckFailed", "RolloutRolledBack"):
        assert events[reason]["type"] == "Warning" and cause in events[reason]["message"], events[reason]
    assert cause in log.read_text(), log.read_text()
    # the dashboard's rollout page: the status message and the Events, as the cache holds them
    cache = Cache(NS)
    cache.seed("rolloutpolicies", [env.kube.get(ROLLOUT_POLICY, NS, "m")])
    cache.seed("leaderworkersets", [env.kube.get(LWS, NS, "m")])
    cache.seed("events", env.kube.list(EVENT, NS)[0])
    page = Renderer(cache, now=time.time).rollout_fragment(NS, "m")
    assert page.count(str(escape(cause))) >= 3, page  # the message, CheckFailed, RolloutRolledBack
    out = io.StringIO()
    with redirect_stdout(out):
        assert kubectl_plugin.main(["status", "m", "-n", NS, "--kubeconfig", str(env.kubeconfig)]) == 0
    assert "RolledBack" in out.getvalue() and cause in out.getvalue(), out.getvalue()

