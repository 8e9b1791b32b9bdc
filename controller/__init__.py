"""Kubernetes-facing core of lwsflow: API types, rollout engine, cluster access, embedded cluster.

Nothing here imports `components` or `pipelines` (dependencies point pipelines -> components -> controller).
"""
