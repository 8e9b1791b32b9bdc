"""controller/api/status.py against the one table of status documents the Argo CD Lua checks also run.

tests/data/status_documents.yaml: each row has the Lua verdict (tests/gitops/integration/test_gitops_argocd.py
checks it in lupa). Here status.py must agree: fully rolled exactly on the rows the Lua calls
Healthy, unless the row documents a deliberate difference in ``differs``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lwsflow.controller.api import status

ROWS = yaml.safe_load((Path(__file__).parents[2] / "data" / "status_documents.yaml").read_text())


def fully_rolled(row: dict[str, Any]) -> bool:
    if row["kind"] == "LeaderWorkerSet":
        return status.lws_fully_rolled(row["object"])
    return status.ds_fully_rolled(row["object"], row.get("external_replicas"))


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_status_agrees_with_the_health_check(row: dict[str, Any]) -> None:
    healthy = row["lua"] == "Healthy"
    if "differs" in row:
        assert fully_rolled(row) is not healthy, f"{row['id']}: documented difference no longer holds"
    else:
        assert fully_rolled(row) is healthy, status.explain_lws(row["object"]) if row["kind"] == \
            "LeaderWorkerSet" else status.explain_ds(row["object"], row.get("external_replicas"))


def test_differences_are_few_and_explained() -> None:
    """Only a rolled-back release (the rollout's own phase annotation) differs on purpose."""
    assert [r["id"] for r in ROWS if "differs" in r] == ["rolled-back"]
