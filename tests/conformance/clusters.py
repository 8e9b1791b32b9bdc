"""The two clusters a conformance check compares: the reference cluster (real control plane + upstream
LWS controller, docs/reference-cluster.md) and the embedded cluster served over HTTPS, both driven by
the same kubectl."""

from __future__ import annotations

import fnmatch
import json
import secrets
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from lwsflow.components.kustomize import kubectl_path

ALLOWLIST = Path(__file__).with_name("allowlist.yaml")


@dataclass
class Target:
    """One cluster as kubectl sees it."""

    name: str
    kubeconfig: Path
    cache: Path

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = [str(kubectl_path()), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache),
               *args]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"[{self.name}] kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc

    def items(self, resource: str, namespace: str) -> list[dict[str, Any]]:
        """The objects of ``resource``; none where the server does not serve the resource at all
        (the difference then shows in the comparison instead of stopping it)."""
        out = self.kubectl("get", resource, "-n", namespace, "-o", "json", check=False)
        if out.returncode != 0 and "doesn't have a resource type" in out.stderr:
            return []
        if out.returncode != 0:
            raise AssertionError(f"[{self.name}] kubectl get {resource} failed: {out.stderr.strip()}")
        return list(json.loads(out.stdout).get("items") or [])

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{secrets.token_hex(3)}"
        self.kubectl("create", "namespace", name)
        return name


class Watch:
    """``kubectl get ARGS -w -o json`` in the background, decoded object by object. With ``events``
    (``--output-watch-events``) each item is ``{"type": ADDED|MODIFIED|DELETED, "object": ...}``;
    ``times`` holds when each arrived (``time.monotonic()``)."""

    def __init__(self, t: Target, *args: str, events: bool = False) -> None:
        cmd = [str(kubectl_path()), "--kubeconfig", str(t.kubeconfig), "--cache-dir", str(t.cache), "get",
               *args, "-w", "-o", "json", *(["--output-watch-events"] if events else [])]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.objects: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        buf, dec = "", json.JSONDecoder()
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            buf += line
            while buf.strip():
                try:
                    obj, end = dec.raw_decode(buf.lstrip())
                except ValueError:
                    break
                self.times.append(time.monotonic())
                self.objects.append(obj)
                buf = buf.lstrip()[end:]

    def stop(self) -> list[dict[str, Any]]:
        self.proc.terminate()
        self.proc.wait(10)
        self.thread.join(5)
        return self.objects


T = TypeVar("T")


def settle(what: str, observe: Callable[[], T], stable_s: float, timeout: float = 90,
           until: Callable[[T], bool] = lambda _o: True) -> T:
    """``observe()`` once it satisfies ``until`` and has not changed for ``stable_s`` seconds (the
    controllers are done); AssertionError naming ``what`` after ``timeout``."""
    last, since = observe(), time.monotonic()
    deadline = since + timeout
    while time.monotonic() - since < stable_s or not until(last):
        assert time.monotonic() < deadline, f"{what} did not settle: {last}"
        time.sleep(0.5)
        now = observe()
        if now != last:
            last, since = now, time.monotonic()
    return last


def wait_for(what: str, check: Callable[[], bool], timeout: float = 120, every: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


def allowlist() -> dict[str, str]:
    """``check id -> reason`` of every difference the conformance tier accepts."""
    entries = yaml.safe_load(ALLOWLIST.read_text()) or []
    out = {}
    for e in entries:
        assert e.get("reason"), f"allow-list entry {e.get('id')} has no reason"
        assert e.get("kind") in KINDS, f"allow-list entry {e.get('id')}: kind must be one of {KINDS}"
        assert e["kind"] != "embedded-gap" or e.get("effect"), \
            f"allow-list entry {e.get('id')}: an embedded gap needs its effect on users"
        out[str(e["id"])] = str(e["reason"])
    return out


# what an entry is (allowlist.yaml's `kind`): the reference running upstream LWS v0.9.0 against
# lwsflow's v0.10+ semantics; the embedded cluster differing from every upstream version (with its
# effect on users, listed in docs/embedded-cluster.md); timing that differs between two runs of the
# reference cluster itself; a part of a real cluster not modelled on purpose
KINDS = ("version", "embedded-gap", "nondeterministic", "modelled-out")
# the running test's ``record_property`` (conftest.py sets it): an allow-list entry used by a test is
# written into the junit report, from which bench/conformance_figures.py counts the run
RECORDER: list[Callable[[str, object], None]] = []


def allowed(key: str) -> str | None:
    """The allow-list entry explaining the difference ``key`` (an exact id, or an fnmatch pattern
    matching it), recorded on the running test as used; None when no entry does."""
    entry = next((p for p in allowlist() if p == key or fnmatch.fnmatchcase(key, p)), None)
    if entry is not None:
        note("allowlisted", entry)
    return entry


def note(name: str, value: object) -> None:
    """A property of the running test's result (results.json, read by bench/conformance_figures.py)."""
    for record in RECORDER:
        record(name, value)


def now_matches(entry_id: str) -> None:
    """The check an entry explains matched in this run: a failure (the entry must go), except for an
    entry with ``runs: some`` (the reference differs in some runs only), which is reported unused."""
    entries = {str(e["id"]): e for e in yaml.safe_load(ALLOWLIST.read_text()) or []}
    if entries[entry_id].get("runs") == "some":
        note("allowlist-unused", entry_id)
        return
    raise AssertionError(f"{entry_id} now matches the reference cluster: drop it from allowlist.yaml")
