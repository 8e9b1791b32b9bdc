"""The catalog's ``queue`` (Kueue's LocalQueue): the label kueue.x-k8s.io/queue-name on each LWS and on
each DS role (whose child LWS then carry it, on the embedded cluster), maxSurge as an integer when a queue
is set, the environment's and the override's queue winning over the model's, bad names refused; the
example quota overlay is Kueue v0.17's storage API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lwsflow.components.catalog import parse_catalog
from lwsflow.components.manifests import render_model
from lwsflow.components.overlays import render_tree
from lwsflow.controller.api import labels as L
from lwsflow.controller.api import paths
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.kube.resources import DS, LWS
from lwsflow.controller.yamlio import load_yaml_documents
from reliability.rollout_env import NS, make_env
from tests.render.render_helpers import LLAMA_8B, REPO, build, catalog_doc, model

PD = model(LLAMA_8B, replicas=None, prefill={"replicas": 2}, decode={"replicas": 3},
           rollout={"maxSurge": "50%", "maxUnavailable": 0})
ENVS = [{"name": "dev", "namespace": "llm-dev"},
        {"name": "prod", "namespace": "llm-prod", "queue": "prod-serving",
         "overrides": {"llama-8b": {"queue": "llama-prod"}}},
        {"name": "staging", "namespace": "llm-staging", "queue": "staging-serving"}]


def _ruc(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]


def test_queue_labels_the_lws_and_renders_an_integer_max_surge() -> None:
    rollout = {"maxSurge": "50%", "maxUnavailable": 0}
    queued = build(model(LLAMA_8B, queue="serving", rollout=rollout))  # 3 replicas: 50% -> 2 (rounded up)
    lws = render_model(queued, "llama-8b")[0]
    assert lws["metadata"]["labels"][L.KUEUE_QUEUE] == "serving"
    assert _ruc(lws)["maxSurge"] == 2
    pod_labels = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
    assert L.KUEUE_QUEUE not in pod_labels  # Kueue's LWS webhook reads the LWS's own label
    plain = render_model(build(model(LLAMA_8B, rollout=rollout)), "llama-8b")[0]
    assert L.KUEUE_QUEUE not in plain["metadata"]["labels"] and _ruc(plain)["maxSurge"] == "50%"


def test_ds_roles_and_pairs_carry_the_queue() -> None:
    ds = render_model(build(model(PD, queue="serving")), "llama-8b")[0]
    assert ds["kind"] == L.DS_KIND and L.KUEUE_QUEUE not in ds["metadata"]["labels"]
    for role, surge in zip(ds["spec"]["roles"], (1, 2), strict=True):  # 50% of 2 and of 3, rounded up
        assert role["metadata"]["labels"][L.KUEUE_QUEUE] == "serving", role["name"]
        assert _ruc(role)["maxSurge"] == surge
    pair = render_model(build(model(PD, queue="serving", pdMode="lws-pair")), "llama-8b")
    lws = [o for o in pair if o["kind"] == L.LWS_KIND]
    assert len(lws) == 2 and all(o["metadata"]["labels"][L.KUEUE_QUEUE] == "serving" for o in lws)


def test_the_overrides_queue_beats_the_environments_which_beats_the_models() -> None:
    cat = build(model(LLAMA_8B, queue="shared"), environments=ENVS)
    queue = {env: render_model(cat, "llama-8b", env)[0]["metadata"]["labels"].get(L.KUEUE_QUEUE)
             for env in ("dev", "prod", "staging")}
    assert queue == {"dev": "shared", "prod": "llama-prod", "staging": "staging-serving"}


def test_an_environment_queue_becomes_an_overlay_patch(tmp_path: Path) -> None:
    cat = build(LLAMA_8B, environments=ENVS[:2])  # no queue on the model: only prod is queue-managed
    files = render_tree(cat, tmp_path)
    assert b"queue-name" not in files["base/llama-8b/leaderworkerset-llama-8b.yaml"]
    prod = files["prod/llama-8b/kustomization.yaml"].decode()
    assert "path: /metadata/labels/kueue.x-k8s.io~1queue-name\n      value: llama-prod" in prod, prod
    assert b"queue-name" not in files["dev/llama-8b/kustomization.yaml"]


@pytest.mark.parametrize(("where", "value"), [
    pytest.param("model", "Not_A_Queue", id="model_not_a_name"),
    pytest.param("environment", "x" * 64, id="environment_too_long_for_a_label"),
    pytest.param("override", "a..b", id="override_not_a_subdomain"),
])
def test_a_bad_queue_name_is_one_error_naming_the_field(where: str, value: str) -> None:
    envs = [{"name": "dev", "namespace": "llm-dev"}, {"name": "prod", "namespace": "llm-prod"}]
    doc = catalog_doc(LLAMA_8B, environments=envs)
    field = {"model": "models[llama-8b].queue", "environment": "environments[prod].queue",
             "override": "environments[prod].overrides.llama-8b.queue"}[where]
    if where == "model":
        doc["models"][0]["queue"] = value
    elif where == "environment":
        doc["environments"][1]["queue"] = value
    else:
        doc["environments"][1]["overrides"] = {"llama-8b": {"queue": value}}
    with pytest.raises(InvalidInput) as exc:
        parse_catalog(doc)
    assert exc.value.field == field and "\n" not in str(exc.value), (exc.value.field, str(exc.value))


def test_child_lws_of_a_queued_ds_carry_the_label_on_the_embedded_cluster(tmp_path: Path) -> None:
    ds = render_model(build(model(PD, queue="serving")), "llama-8b")[0]
    ds["metadata"]["namespace"] = NS
    env = make_env(tmp_path)
    try:
        env.kube.create(DS, NS, ds)

        def children(_obj: object) -> list[dict[str, Any]]:
            return env.kube.list(LWS, NS, label_selector=f"{L.DS_NAME}=llama-8b")[0]

        env.wait(lambda o: len(children(o)) == 2, res=DS, name="llama-8b")
        assert {c["metadata"]["labels"][L.KUEUE_QUEUE] for c in children(None)} == {"serving"}
    finally:
        env.close()


def test_example_quota_overlay_is_kueues_storage_api() -> None:
    folder = REPO / "examples" / "kueue" / "quota"
    kust = load_yaml_documents(folder / "kustomization.yaml")[0]
    docs = [d for f in kust["resources"] for d in load_yaml_documents(folder / f)]
    assert sorted(d["kind"] for d in docs) == ["ClusterQueue", "LocalQueue", "ResourceFlavor"]
    for d in docs:  # the version Kueue v0.17's CRDs (the pinned module) store
        plural = {"ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
                  "ResourceFlavor": "resourceflavors"}[d["kind"]]
        crd = load_yaml_documents(paths.kueue_crd(plural))[0]
        storage = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
        assert d["apiVersion"] == f"kueue.x-k8s.io/{storage}"
    catalog = parse_catalog(load_yaml_documents(REPO / "examples" / "kueue" / "catalog.yaml")[0])
    lq = next(d for d in docs if d["kind"] == "LocalQueue")
    prod = render_model(catalog, "llama-70b", "prod")[0]
    assert prod["metadata"]["labels"][L.KUEUE_QUEUE] == lq["metadata"]["name"]
    assert catalog.environment("prod").namespace == lq["metadata"]["namespace"]
    cq = next(d for d in docs if d["kind"] == "ClusterQueue")
    assert cq["metadata"]["name"] == lq["spec"]["clusterQueue"]
