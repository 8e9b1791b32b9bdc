"""``lwsflow.rehearsal.catalog_cluster``: a simulated cluster whose pools are a catalog's node pools."""

from __future__ import annotations

from pathlib import Path

from lwsflow.components.catalog import load_catalog
from lwsflow.controller.api import labels as L
from lwsflow.rehearsal.catalog_cluster import cluster_config_for, pool_config_for
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ClusterConfig, PoolConfig, Taint

GKE = "cloud.google.com/gke-accelerator"


def _catalog(tmp_path: Path, pool: str, pools: str) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(f"""\
namespace: llm
nodePools:
{pools}
models:
  - name: m
    model: org/m
    parametersB: 8
    architecture: {{layers: 32, attentionHeads: 32, kvHeads: 8, headDim: 128}}
    image: vllm/vllm-openai:v0.11.0@sha256:{"a" * 64}
    nodePool: {pool}
    replicas: 1
environments: [{{name: dev}}]
""")
    return path


def test_a_catalog_pool_becomes_a_pool_with_its_labels_taints_and_size(tmp_path: Path) -> None:
    cat = load_catalog(_catalog(tmp_path, "a100", """\
  - {name: a100, gpu: nvidia-a100-80gb, gpuMemoryGiB: 80, gpusPerNode: 8, nodes: 3, cpuPerNode: 120,
     memoryGiBPerNode: 900, nodeSelector: {pool: a}, topologyKey: topo,
     tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule},
                   {key: dedicated, operator: Equal, value: llm},
                   {operator: Exists}]}"""))
    pool = pool_config_for(cat.nodePools[0])
    assert pool == PoolConfig(name="a100", count=3, gpus_per_node=8, gpu_product="nvidia-a100-80gb", cpu=120,
                              memory_gi=900, labels={"pool": "a"}, topology_key="topo",
                              topology_domains=3,  # never more domains than nodes
                              taints=[Taint(key="nvidia.com/gpu", value="", effect="NoSchedule"),
                                      # no effect tolerates all: NoSchedule stands in; keyless needs none
                                      Taint(key="dedicated", value="llm", effect="NoSchedule")])
    config = cluster_config_for(cat, never_ready=["*-broken@*"])
    assert [p.name for p in config.pools] == ["cpu", "a100"] and config.never_ready_images == ["*-broken@*"]


def test_the_cpu_pool_steps_aside_for_a_catalog_pool_named_cpu(tmp_path: Path) -> None:
    cat = load_catalog(_catalog(tmp_path, "cpu", """\
  - {name: cpu, gpu: nvidia-l4, gpuMemoryGiB: 24, gpusPerNode: 1, nodes: 2}"""))
    assert [p.name for p in cluster_config_for(cat).pools] == ["lwsflow-cpu", "cpu"]


def test_the_default_cluster_has_the_example_catalogs_gpu_pools(example_catalog: Path) -> None:
    """``sim serve`` with no config must schedule the example catalog's rendered pods: same pools,
    labels, GPU product values, sizes and tolerated taints as a cluster built from the catalog."""

    def shape(p: PoolConfig) -> tuple:
        return (p.name, p.count, p.gpus_per_node, p.gpu_product, p.cpu, p.memory_gi, p.labels, p.topology_key,
                sorted((t.key, t.effect) for t in p.taints))  # Exists tolerations: any taint value

    want = [shape(p) for p in cluster_config_for(load_catalog(example_catalog)).pools if p.gpus_per_node]
    assert [shape(p) for p in ClusterConfig.default().pools if p.gpus_per_node] == want


def test_catalog_nodes_carry_what_rendered_pods_select(example_catalog: Path) -> None:
    cluster = Cluster(cluster_config_for(load_catalog(example_catalog)))
    nodes = {n["metadata"]["name"]: n for n in cluster.store.iter_raw("nodes")}
    h100 = nodes["h100x8-0000"]
    assert h100["metadata"]["labels"][GKE] == h100["metadata"]["labels"][L.GPU_PRODUCT] == "nvidia-h100-80gb"
    alloc = h100["status"]["allocatable"]
    assert alloc["cpu"] == "208" and alloc["memory"] == "1800Gi"
    assert h100["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}]
    assert len({n["metadata"]["labels"]["cloud.google.com/gce-topology-block"]
                for n in nodes.values() if n["metadata"]["labels"][L.NODE_POOL] == "h100x8"}) == 4
    l40s = [n for n in nodes.values() if n["metadata"]["labels"][L.NODE_POOL] == "l40sx4"]
    assert len(l40s) == 8 and l40s[0]["status"]["allocatable"][L.GPU_RESOURCE] == "4"
