"""The staged rollout engine: stages, a pure planner, the readiness gate, persisted state, the executor.

Layering: ``stages``/``planner``/``gate``/``state``/``capacity`` are pure (no I/O); ``engine`` and ``ds``
drive a cluster through :mod:`lwsflow.controller.kube` and never know which cluster it is. Blue-green
and the P/D pair live in their own feature folders (``controller/bluegreen``, ``controller/pd``).
"""
