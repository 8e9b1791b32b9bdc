"""The views every reliability environment gives of its embedded cluster (one place for them)."""

from __future__ import annotations

from dataclasses import dataclass

from lwsflow.sim.apiserver import ApiServer
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.testing import EmbeddedCluster


@dataclass
class SimViews:
    """An environment around one embedded cluster: the cluster model and its API server."""

    sim: EmbeddedCluster

    @property
    def cluster(self) -> Cluster:
        return self.sim.cluster

    @property
    def server(self) -> ApiServer:
        return self.sim.api
