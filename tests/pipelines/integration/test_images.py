"""build-image with real buildah and a real docker-registry."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import httpx
import pytest

from lwsflow.components.images import BuiltImage, ImageRef, LocalRegistry, build_image, manifest_digest
from lwsflow.controller.errors import InvalidInput, OperationFailed


def test_build_and_push_returns_the_registry_digest(registry: LocalRegistry, build_context: Path,
                                                    buildah_storage: Path) -> None:
    out = build_image(build_context, f"{registry.host}/lwsflow/engine:t1", storage=buildah_storage)
    assert isinstance(out, BuiltImage)
    assert out.reference == f"{registry.host}/lwsflow/engine@{out.digest}"
    # The registry serves exactly that manifest: fetch it by digest and check its content hash.
    r = httpx.get(f"http://{registry.host}/v2/lwsflow/engine/manifests/{out.digest}",
                  headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    assert r.status_code == 200
    assert "sha256:" + hashlib.sha256(r.content).hexdigest() == out.digest
    assert manifest_digest(ImageRef.parse(out.tagged)) == out.digest
    # skopeo, an independent client, agrees.
    sk = subprocess.run(["skopeo", "inspect", "--tls-verify=false", f"docker://{out.tagged}"],
                        capture_output=True, text=True, timeout=30, check=True)
    assert json.loads(sk.stdout)["Digest"] == out.digest


def test_different_content_gives_a_different_digest(registry: LocalRegistry, build_context: Path,
                                                    buildah_storage: Path) -> None:
    a = build_image(build_context, f"{registry.host}/lwsflow/engine:a", storage=buildah_storage)
    (build_context / "model.txt").write_text("other weights\n")
    b = build_image(build_context, f"{registry.host}/lwsflow/engine:b", storage=buildah_storage)
    assert a.digest != b.digest


def test_missing_context_is_invalid_input(registry: LocalRegistry, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not a directory"):
        build_image(tmp_path / "nope", f"{registry.host}/x:1")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInput, match="no Containerfile"):
        build_image(tmp_path / "empty", f"{registry.host}/x:1")


def test_broken_containerfile_fails_cleanly(registry: LocalRegistry, build_context: Path,
                                            buildah_storage: Path) -> None:
    (build_context / "Containerfile").write_text("FROM scratch\nCOPY missing.bin /missing.bin\n")
    with pytest.raises(OperationFailed, match=r"building .* failed: .*missing\.bin"):
        build_image(build_context, f"{registry.host}/lwsflow/broken:1", storage=buildah_storage)
    r = httpx.head(f"http://{registry.host}/v2/lwsflow/broken/manifests/1")
    assert r.status_code == 404  # nothing was pushed


def test_unreachable_registry_fails_cleanly(build_context: Path, buildah_storage: Path) -> None:
    with LocalRegistry() as reg:
        dead = reg.host
    with pytest.raises(OperationFailed, match=f"registry {dead} is unreachable"):
        build_image(build_context, f"{dead}/lwsflow/engine:1", storage=buildah_storage)


def test_bad_reference_names_the_field(build_context: Path) -> None:
    with pytest.raises(InvalidInput) as exc:
        build_image(build_context, "Not A Ref")
    assert exc.value.field == "image"


def test_registry_binds_loopback_and_stops(tmp_path: Path) -> None:
    reg = LocalRegistry()
    host = reg.start()
    assert host.startswith("127.0.0.1:")
    assert httpx.get(f"http://{host}/v2/").status_code == 200
    reg.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://{host}/v2/", timeout=1)


def test_registry_credentials_go_through_a_private_authfile(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The password never appears on buildah's command line (visible to ps); a 0600 authfile holds it."""
    import base64
    import json
    import stat

    from lwsflow.components import images

    monkeypatch.setenv(images.ENV_REGISTRY_USER, "robot")
    monkeypatch.setenv(images.ENV_REGISTRY_PASSWORD, "canary-pw-4711")
    args = images._auth_args("registry.example:5000", tmp_path)
    assert args[0] == "--authfile" and "canary-pw-4711" not in " ".join(args)
    path = Path(args[1])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    auth = json.loads(path.read_text())["auths"]["registry.example:5000"]["auth"]
    assert base64.b64decode(auth).decode() == "robot:canary-pw-4711"
    monkeypatch.delenv(images.ENV_REGISTRY_PASSWORD)
    assert images._auth_args("registry.example:5000", tmp_path / "none") == []
