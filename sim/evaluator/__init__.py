"""Job-level, event-driven evaluator of GPU pool scheduling policies in virtual time.

Layers (each imports only the ones before it): ``events`` (what a scenario yields) -> ``scenario``
(YAML data, ``module:function`` generators, shipped names) -> ``pool`` (free-GPU buckets per node)
-> ``engine`` (the event loop driving a ``lwsflow.sim.policies`` policy) -> ``metrics`` (deadlines,
waits, utilisation, fragmentation, tables) -> ``gantt`` (matplotlib picture). Unlike the embedded
cluster it keeps no Kubernetes objects: a job is a gang of identical pods with a duration, which is
what lets a thousand nodes and five thousand week-long jobs run in seconds.
"""
