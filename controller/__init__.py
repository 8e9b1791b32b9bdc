"""Kubernetes-facing core of lwsflow: API types, cluster access, rollout engine, in-cluster controller.

Nothing here imports `components` or `pipelines` (dependencies point pipelines -> components -> controller).
"""
