"""A second blue-green of a pair: after the first, the pair is ``<base>-<rev>`` but Git's manifest
still labels it ``lwsflow.io/pd-pair: <base>``; ``--manifest`` takes it without an edit (issue 23)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.rollout import session


def _manifest(tmp: Path, pair: str) -> Path:
    docs = [{"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
             "metadata": {"name": f"{pair}-{r}", "labels": {L.PD_PAIR: pair, L.ROLE: r}}, "spec": {}}
            for r in ("prefill", "decode")]
    path = tmp / "m.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_the_renamed_pair_takes_its_first_names_manifest(tmp_path: Path) -> None:
    path = _manifest(tmp_path, "chat")
    for name in ("chat", "chat-1a2b3c4d"):
        found = session.load_manifests(path, session.parse_target(f"pair/{name}", "default"))
        assert {r: d["metadata"]["name"] for r, d in found.items()} == {"prefill": "chat-prefill",
                                                                        "decode": "chat-decode"}


@pytest.mark.parametrize("name", ["other-1a2b3c4d", "chat-1a2b3c4", "chat-zzzzzzzz"])
def test_only_a_revision_suffix_is_dropped(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidInput, match="no LeaderWorkerSet for"):
        session.load_manifests(_manifest(tmp_path, "chat"), session.parse_target(f"pair/{name}", "default"))
