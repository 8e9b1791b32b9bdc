"""The build-image step: build a container image with buildah and push it, returning its registry digest.

Rootless-friendly and daemonless: ``buildah --storage-driver vfs bud --isolation chroot`` needs no
Docker engine, so the same function runs on a laptop, in CI and inside a pipeline pod. The digest
returned is the one the *registry* reports for the pushed manifest (checked with a ``HEAD`` on
``/v2/<repo>/manifests/<tag>``), not just what buildah wrote, so a pinned ``@sha256:`` reference is
exactly what a kubelet would pull.

Registry credentials come from the environment (``REGISTRY_USERNAME`` / ``REGISTRY_PASSWORD``),
which a pipeline fills from a Kubernetes Secret: they are never parameters.

``LocalRegistry`` runs the Debian ``docker-registry`` (distribution 2.x) bound to 127.0.0.1 on a
free port with a throw-away storage folder: the local stand-in for a real registry.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from lwsflow.components.overlays import DIGEST
from lwsflow.components.proc import run_bounded, stop_process
from lwsflow.controller.errors import InvalidInput, OperationFailed

# host[:port]/path[:tag] with a registry host (a dot, a colon or "localhost" in the first part).
_REF = re.compile(r"^(?P<host>[a-zA-Z0-9.-]+(?::\d{1,5})?)/(?P<repo>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
                  r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?\Z")
_MANIFEST_TYPES = ", ".join((
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
))
ENV_REGISTRY_USER = "REGISTRY_USERNAME"
ENV_REGISTRY_PASSWORD = "REGISTRY_PASSWORD"


@dataclass(frozen=True)
class ImageRef:
    """A parsed ``host[:port]/repo[:tag]`` push target."""

    host: str
    repository: str
    tag: str

    @classmethod
    def parse(cls, image: str, field: str = "image") -> ImageRef:
        m = _REF.match(image)
        if not m or ("." not in m["host"] and ":" not in m["host"] and m["host"] != "localhost"):
            raise InvalidInput(f"{image!r} is not an image reference like 127.0.0.1:5000/lwsflow/engine:v1 "
                               "(registry host, repository, optional tag)", field=field)
        return cls(m["host"], m["repo"], m["tag"] or "latest")

    @property
    def tagged(self) -> str:
        return f"{self.host}/{self.repository}:{self.tag}"

    def pinned(self, digest: str) -> str:
        return f"{self.host}/{self.repository}@{digest}"


@dataclass(frozen=True)
class BuiltImage:
    """What build-image outputs: the pushed reference pinned to the registry's manifest digest."""

    reference: str  # host/repo@sha256:...
    tagged: str  # host/repo:tag
    digest: str  # sha256:...
    image_id: str  # buildah's local image (config) id

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def _insecure(host: str) -> bool:
    """Plain HTTP and no TLS verification only for registries on this machine."""
    return host.split(":")[0] in ("127.0.0.1", "localhost", "::1")


def _auth() -> tuple[str, str] | None:
    user, password = os.environ.get(ENV_REGISTRY_USER), os.environ.get(ENV_REGISTRY_PASSWORD)
    return (user, password) if user and password else None


def registry_url(host: str) -> str:
    return f"{'http' if _insecure(host) else 'https'}://{host}"


def check_registry(host: str, timeout: float = 5.0) -> None:
    """Fail with one readable line unless ``host`` answers the registry API (``GET /v2/``)."""
    try:
        r = httpx.get(f"{registry_url(host)}/v2/", auth=_auth(), timeout=timeout)
    except httpx.HTTPError as exc:
        raise OperationFailed(f"registry {host} is unreachable: {type(exc).__name__}: {exc}") from None
    if r.status_code not in (200, 401):  # 401: alive, wants credentials (checked on push)
        raise OperationFailed(f"registry {host} answered GET /v2/ with HTTP {r.status_code}; not a registry?")


def manifest_digest(ref: ImageRef, timeout: float = 10.0) -> str:
    """The digest the registry serves for ``ref`` (``Docker-Content-Digest`` of a manifest HEAD)."""
    url = f"{registry_url(ref.host)}/v2/{ref.repository}/manifests/{ref.tag}"
    try:
        r = httpx.head(url, headers={"Accept": _MANIFEST_TYPES}, auth=_auth(), timeout=timeout)
    except httpx.HTTPError as exc:
        raise OperationFailed(f"registry {ref.host} is unreachable: {exc}") from None
    digest = r.headers.get("Docker-Content-Digest", "")
    if r.status_code != 200 or not DIGEST.match(digest):
        raise OperationFailed(f"registry {ref.host} has no manifest for {ref.tagged} (HTTP {r.status_code})")
    return digest


def image_labels(reference: str, timeout: float = 10.0) -> dict[str, str]:
    """The labels of a pushed image ``host/repo@sha256:...``, read through the registry API: the
    manifest by digest, then its config blob (``config.Labels``). A single-image manifest only."""
    host, _, rest = reference.partition("/")
    repo, sep, digest = rest.partition("@")
    if not sep or not DIGEST.match(digest):
        raise InvalidInput(f"{reference!r} is not pinned by digest (host/repo@sha256:...)", field="image")
    base = f"{registry_url(host)}/v2/{repo}"
    try:
        man = httpx.get(f"{base}/manifests/{digest}", headers={"Accept": _MANIFEST_TYPES}, auth=_auth(),
                        timeout=timeout)
        man.raise_for_status()
        config_digest = str((man.json().get("config") or {}).get("digest", ""))
        if not DIGEST.match(config_digest):
            return {}  # an index (multi-arch) or an artifact: no single config to read
        blob = httpx.get(f"{base}/blobs/{config_digest}", auth=_auth(), timeout=timeout,
                         follow_redirects=True)
        blob.raise_for_status()
        labels = (blob.json().get("config") or {}).get("Labels") or {}
    except (httpx.HTTPError, ValueError) as exc:
        raise OperationFailed(f"registry {host}: cannot read the labels of {reference}: {exc}") from None
    return {str(k): str(v) for k, v in labels.items()}


def default_storage() -> Path:
    """Per-user buildah storage (vfs layers are plain folders; kept between builds as a cache)."""
    return Path(tempfile.gettempdir()) / f"lwsflow-buildah-{os.getuid()}"


def _auth_args(host: str, folder: Path) -> list[str]:
    """``--authfile`` for the push when registry credentials are set: written 0600 into ``folder``,
    never on the command line (``--creds user:pass`` would show the password to anyone running ps)."""
    creds = _auth()
    if not creds:
        return []
    path = folder / "auth.json"
    token = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"auths": {host: {"auth": token}}}, f)
    return ["--authfile", str(path)]


def _buildah(storage: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    if shutil.which("buildah") is None:
        raise OperationFailed("buildah is not installed (apt-get install -y buildah)")
    cmd = ["buildah", "--root", str(storage / "root"), "--runroot", str(storage / "runroot"),
           "--storage-driver", "vfs", *args]
    return run_bounded(cmd, what=f"buildah {args[0]}", timeout=timeout)


def _last_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower()]
    return (errs or lines or [f"exit code {proc.returncode}"])[-1][:400]


def build_image(context: str | Path, image: str, *, containerfile: str | Path | None = None,
                build_args: dict[str, str] | None = None, storage: Path | None = None,
                timeout: float = 600.0) -> BuiltImage:
    """Build ``context`` (with ``Containerfile``/``Dockerfile`` in it unless given) and push to ``image``.

    Returns the image pinned to the digest the registry reports. A missing context or Containerfile
    is ``InvalidInput``; an unreachable registry or a failed build/push is ``OperationFailed``; in
    every failure no digest is returned.
    """
    ctx = Path(context)
    if not ctx.is_dir():
        raise InvalidInput("build context is not a directory", field="context", source=str(ctx))
    if containerfile is None:
        found = [ctx / n for n in ("Containerfile", "Dockerfile") if (ctx / n).is_file()]
        if not found:
            raise InvalidInput("build context has no Containerfile or Dockerfile", field="context",
                               source=str(ctx))
        cfile = found[0]
    else:
        cfile = Path(containerfile)
        if not cfile.is_file():
            raise InvalidInput("no such Containerfile", field="containerfile", source=str(cfile))
    ref = ImageRef.parse(image)
    check_registry(ref.host)  # before building: a dead registry is the commonest failure, say so first

    store = storage or default_storage()
    store.mkdir(parents=True, exist_ok=True)
    args = ["bud", "--isolation", "chroot", "--layers=false", "-t", ref.tagged, "-f", str(cfile)]
    for k, v in sorted((build_args or {}).items()):
        args += ["--build-arg", f"{k}={v}"]
    built = _buildah(store, *args, str(ctx), timeout=timeout)
    if built.returncode != 0:
        raise OperationFailed(f"building {ref.tagged} from {ctx} failed: {_last_error(built)}")
    image_id = built.stdout.strip().splitlines()[-1] if built.stdout.strip() else ""

    with tempfile.TemporaryDirectory(prefix="lwsflow-push-") as tmp:
        digestfile = Path(tmp) / "digest"
        push = ["push", f"--tls-verify={'false' if _insecure(ref.host) else 'true'}",
                "--digestfile", str(digestfile), "--retry", "1", *_auth_args(ref.host, Path(tmp))]
        pushed = _buildah(store, *push, ref.tagged, f"docker://{ref.tagged}", timeout=timeout)
        if pushed.returncode != 0:
            raise OperationFailed(f"pushing {ref.tagged} failed: {_last_error(pushed)}")
        local_digest = digestfile.read_text().strip() if digestfile.is_file() else ""
    remote = manifest_digest(ref)
    if local_digest and local_digest != remote:
        raise OperationFailed(f"registry serves {remote} for {ref.tagged} but buildah pushed {local_digest}")
    return BuiltImage(reference=ref.pinned(remote), tagged=ref.tagged, digest=remote, image_id=image_id)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalRegistry:
    """``docker-registry serve`` on 127.0.0.1, a free port and a private storage folder.

    Use as a context manager; ``host`` is ``127.0.0.1:PORT`` once started.
    """

    def __init__(self, storage: Path | None = None, start_timeout: float = 15.0) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._storage = storage
        self._timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def host(self) -> str:
        if self._proc is None:
            raise OperationFailed("the local registry is not running")
        return f"127.0.0.1:{self.port}"

    def start(self) -> str:
        """Start the registry and wait (bounded) until ``/v2/`` answers; returns ``host``."""
        if shutil.which("docker-registry") is None:
            raise OperationFailed("docker-registry is not installed (apt-get install -y docker-registry)")
        self._tmp = tempfile.TemporaryDirectory(prefix="lwsflow-registry-")
        base = Path(self._tmp.name)
        storage = self._storage or base / "storage"
        storage.mkdir(parents=True, exist_ok=True)
        for _attempt in range(3):  # the free port can be taken between probe and bind: retry
            self.port = _free_port()
            config = base / "config.yml"
            config.write_text(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n"
                f"storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n"
                f"http:\n  addr: 127.0.0.1:{self.port}\n  secret: lwsflow-local\n")
            log = (base / "registry.log").open("wb")
            self._proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
            log.close()
            if self._wait_ready(base / "registry.log"):
                return self.host
        self.stop()
        raise OperationFailed("the local registry did not start (see its log in the temp folder)")

    def _wait_ready(self, logfile: Path) -> bool:
        assert self._proc is not None
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = logfile.read_text(errors="replace")[-300:] if logfile.exists() else ""
                if "address already in use" in tail:
                    return False
                raise OperationFailed(f"docker-registry exited with {self._proc.returncode}: {tail.strip()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/v2/", timeout=1.0).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self._proc.kill()
        self._proc.wait(timeout=5)
        raise OperationFailed(f"docker-registry did not answer within {self._timeout:.0f}s")

    def stop(self) -> None:
        """Stop the registry process and delete its temporary storage."""
        if self._proc is not None:
            stop_process(self._proc, grace_s=5)
        self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> LocalRegistry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
