"""kwok Stage documents: how fake nodes come up and how bound pods move Pending -> Running -> Ready.

kwok (sigs.k8s.io/kwok) plays every kubelet of the reference cluster. It needs its stages spelled
out (kwokctl normally writes them); these are the project's own, shaped like kwok's "fast" stages:

- a node without ``Ready=True`` becomes Ready, keeping the capacity, allocatable and addresses it
  was created with (its Lease is renewed by kwok's ``--node-lease-duration-seconds``);
- a bound pending pod becomes Running at once and Ready ``ready_delay_s`` later, unless one of its
  images matches a "never ready" pattern: then it stays Running and not Ready (a bad release);
- a pod annotated with ``RUN_DURATION_ANNOTATION`` (a Go duration such as ``"1.5s"``) is a batch
  job: it becomes Running and Ready at once and Succeeded that long later, its containers
  terminated with exit code 0 (kwok's delay ``durationFrom`` reads the annotation), so its GPUs go
  back to the scheduler (check 6 of the conformance tier). kwok stamps when it started and
  finished the job into ``STARTED_AT_ANNOTATION`` / ``FINISHED_AT_ANNOTATION`` (RFC 3339 with
  nanoseconds: the API's own timestamps have a one-second resolution);
- a pod being deleted is removed (no kubelet to wait for).

Selectors are jq expressions evaluated by kwok; image patterns are fnmatch globs turned into RE2.
"""

from __future__ import annotations

import json
import string
from typing import Any

# kwok manages only nodes carrying this annotation (``--manage-nodes-with-annotation-selector``).
NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_ANNOTATION_VALUE = "fake"

# A batch pod's run time, from Running to Succeeded: a Go duration (time.ParseDuration), e.g. "1.5s".
RUN_DURATION_ANNOTATION = "kwok.lwsflow.io/run-duration"
STARTED_AT_ANNOTATION = "kwok.lwsflow.io/started-at"
FINISHED_AT_ANNOTATION = "kwok.lwsflow.io/finished-at"

_NOT_DELETING = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
_RUN_DURATION = f'.metadata.annotations["{RUN_DURATION_ANNOTATION}"]'
_SERVING = {"key": _RUN_DURATION, "operator": "DoesNotExist"}
_BATCH = {"key": _RUN_DURATION, "operator": "Exists"}
_PENDING = {"key": ".status.phase", "operator": "In", "values": ["Pending"]}

_NODE_STATUS = """\
{{ $now := Now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
  kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
  containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
phase: Running
"""

# {ready} is "true" or "false": the same running status, Ready or not.
_POD_STATUS = """\
{{{{ $now := Now }}}}
conditions:
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "True"
  type: Initialized
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "{ready_cond}"
  type: Ready
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "{ready_cond}"
  type: ContainersReady
{{{{ range .spec.readinessGates }}}}
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "{ready_cond}"
  type: {{{{ .conditionType | Quote }}}}
{{{{ end }}}}
containerStatuses:
{{{{ range .spec.containers }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
  ready: {ready}
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
phase: Running
"""

# Only the first stage assigns addresses: PodIPsWith hands out a fresh IP on every call, and a second
# podIPs entry of the same family is refused by the API server.
_POD_ADDRESSES = """\
{{ with NodeIPsWith .spec.nodeName }}
hostIP: {{ index . 0 | Quote }}
{{ end }}
{{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
startTime: {{ Now | Quote }}
"""


# Every container terminated with exit code 0; the pod keeps its addresses (kwok's pod-complete shape).
_POD_SUCCEEDED = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  reason: PodCompleted
  status: "False"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  reason: PodCompleted
  status: "False"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: Succeeded
"""


def _stamped(status_template: str, annotation: str) -> dict[str, Any]:
    """A stage's next step: the status patch, then the annotation stamped with kwok's clock. Each
    update event restarts the delay of the stage it matches: after the Running patch the stamp only
    restarts job-complete's by milliseconds, and after Succeeded it matches no stage (stamped first,
    the still-Running pod would be queued for job-complete a second time)."""
    return {"patches": [
        {"subresource": "status", "root": "status", "template": status_template},
        {"root": "metadata", "template": f"annotations:\n  {annotation}: {{{{ Now | Quote }}}}\n"},
    ]}


def glob_to_re2(pattern: str) -> str:
    """An anchored RE2 regex for an fnmatch glob (``*`` and ``?``; everything else literal)."""
    out = []
    for c in pattern:
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c in string.punctuation:
            out.append("\\" + c)
        else:
            out.append(c)
    return "^" + "".join(out) + "$"


def _image_matches(patterns: list[str]) -> str:
    """A jq expression yielding, per container, whether its image matches any pattern."""
    regex = "|".join(f"({glob_to_re2(p)})" for p in patterns)
    return f".spec.containers.[].image | test({json.dumps(regex)})"


def _stage(name: str, kind: str, selector: list[dict[str, Any]], nxt: dict[str, Any],
           delay_ms: int = 0, delay_from: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceRef": {"apiGroup": "v1", "kind": kind},
                            "selector": {"matchExpressions": selector}, "next": nxt}
    if delay_ms:
        spec["delay"] = {"durationMilliseconds": delay_ms}
    if delay_from:  # a jq expression yielding a Go duration string
        spec["delay"] = {"durationMilliseconds": delay_ms, "durationFrom": {"jq": {"expression": delay_from}}}
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
            "spec": spec}


def stages(ready_delay_s: float, never_ready: list[str]) -> list[dict[str, Any]]:
    """The Stage documents for kwok's ``--config``: bound pods start Running (not Ready) at once and
    turn Ready ``ready_delay_s`` later, unless an image matches a ``never_ready`` pattern; batch pods
    (``RUN_DURATION_ANNOTATION``) run Ready at once and succeed after their run duration."""
    not_ready: dict[str, Any] = {"key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                 "operator": "NotIn", "values": ["True"]}
    running: dict[str, Any] = {"key": ".status.phase", "operator": "In", "values": ["Running"]}
    ready_selector = [_NOT_DELETING, running, not_ready]
    if never_ready:
        ready_selector.append({"key": _image_matches(never_ready), "operator": "NotIn", "values": ["true"]})
    return [
        _stage("lwsflow-node-initialize", "Node", [not_ready], {"statusTemplate": _NODE_STATUS}),
        _stage("lwsflow-pod-running", "Pod", [_NOT_DELETING, _PENDING, _SERVING],
               {"statusTemplate": _POD_STATUS.format(ready="false", ready_cond="False") + _POD_ADDRESSES}),
        _stage("lwsflow-job-running", "Pod", [_NOT_DELETING, _PENDING, _BATCH], _stamped(
            _POD_STATUS.format(ready="true", ready_cond="True") + _POD_ADDRESSES, STARTED_AT_ANNOTATION)),
        _stage("lwsflow-job-complete", "Pod", [_NOT_DELETING, running, _BATCH],
               _stamped(_POD_SUCCEEDED, FINISHED_AT_ANNOTATION), delay_from=_RUN_DURATION),
        _stage("lwsflow-pod-ready", "Pod", ready_selector,
               {"statusTemplate": _POD_STATUS.format(ready="true", ready_cond="True")},
               delay_ms=int(ready_delay_s * 1000)),
        _stage("lwsflow-pod-delete", "Pod", [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
               {"delete": True}),
    ]
