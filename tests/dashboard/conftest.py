"""Dashboard tests: views and server without a browser, and the browser tests (Debian's chromium,
headless, driven by Selenium with Debian's chromedriver; one browser for the whole folder)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import Resource

_RBAC = "rbac.authorization.k8s.io"


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless chromium (installed by scripts/setup) at a fixed window size, for screenshots."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert binary and driver, "chromium and chromedriver are installed by scripts/setup (apt-get)"
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1100", "--disable-extensions", "--no-first-run"):
        opts.add_argument(arg)
    d = webdriver.Chrome(options=opts, service=Service(driver))  # no Selenium Manager: local binaries
    d.set_page_load_timeout(30)
    try:
        yield d
    finally:
        d.quit()


@pytest.fixture
def viewer_kubeconfig() -> Any:
    return _viewer_kubeconfig


def _viewer_kubeconfig(admin: Kube, admin_kubeconfig: Path, out: Path, namespace: str = "default") -> Path:
    """A ServiceAccount that may read what the dashboard shows in ``namespace`` (get/list/watch) and
    write nothing; its kubeconfig (a TokenRequest token) at ``out``."""
    from lwsflow.cli import main

    sa, role = Resource("", "v1", "serviceaccounts"), Resource(_RBAC, "v1", "roles")
    binding = Resource(_RBAC, "v1", "rolebindings")
    admin.create(sa, namespace, {"metadata": {"name": "viewer", "namespace": namespace}})
    admin.create(role, namespace, {"metadata": {"name": "viewer", "namespace": namespace}, "rules": [
        {"apiGroups": ["", "apps", "lwsflow.io", "leaderworkerset.x-k8s.io", "disaggregatedset.x-k8s.io",
                       "gateway.networking.k8s.io"],
         "resources": ["rolloutpolicies", "leaderworkersets", "disaggregatedsets", "statefulsets", "pods",
                       "events", "httproutes"], "verbs": ["get", "list", "watch"]}]})
    admin.create(binding, namespace, {
        "metadata": {"name": "viewer", "namespace": namespace},
        "roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": "viewer"},
        "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": namespace}]})
    assert main(["sim", "token", "viewer", "-n", namespace, "--kubeconfig", str(admin_kubeconfig),
                 "--kubeconfig-out", str(out)]) == 0
    return out
