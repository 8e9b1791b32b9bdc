"""PersistentVolumeClaims are served (``kubectl get pvc``) and bound at once (no storage model), so a
manifest with claims behaves as on a cluster with a default StorageClass. Issue 12 item 2."""

from __future__ import annotations


def test_kubectl_creates_and_lists_a_bound_claim(kubectl, tmp_path) -> None:
    manifest = tmp_path / "pvc.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: weights}\n"
        "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 50Gi}}}\n")
    assert kubectl("apply", "-f", str(manifest)).stdout == "persistentvolumeclaim/weights created\n"
    out = kubectl("get", "pvc").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS",
                              "VOLUMEATTRIBUTESCLASS", "AGE"]
    assert out[1].split()[:6] == ["weights", "Bound", "50Gi", "RWO", "<unset>", "<unset>"]
