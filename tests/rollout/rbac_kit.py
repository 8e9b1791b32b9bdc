"""What the RBAC tests share: an embedded cluster whose pods serve (stand-in engines), an LWS behind a
Service, one check of each kind, and a local HTTP endpoint (the http check's URL, the webhook)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.resources import Resource
from reliability.rollout_env import NS, Env, lws_manifest, make_env

SERVICE = Resource("", "v1", "services")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Env]:
    """The embedded cluster with stand-in engines on the pods' IPs (the smoke check talks to them)."""
    e = make_env(tmp_path, images={})
    try:
        yield e
    finally:
        e.close()


def every_check(url: str) -> list[dict[str, Any]]:
    """One of each check kind a stage can name."""
    return [{"smoke": {}}, {"http": {"url": f"{url}/ready"}}, {"command": {"command": ["true"]}}]


ANALYSIS = {"metrics": [{"name": "smoke", "provider": {"smoke": {}}, "successCondition": "result >= 1"}]}


def serving(name: str, port: int, **kw: Any) -> dict:
    """An LWS whose leaders serve model ``m`` on ``port``, behind a Service (the smoke's service check)."""
    return lws_manifest(name, annotations={L.SERVED_MODEL: "m", L.SERVING_PORT: str(port)}, **kw)


def service_for(env: Env, name: str, port: int) -> None:
    env.kube.create(SERVICE, NS, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"{name}-http"},
                                  "spec": {"selector": {L.NAME: name, L.WORKER_INDEX: "0"},
                                           "ports": [{"name": "http", "port": 80, "targetPort": port}]}})
