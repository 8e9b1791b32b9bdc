"""Prefill/decode, in one place: ``pair`` (the coordinated rollout of a P/D pair of LWS, decode first,
under the ratio's max-skew gate), ``compat`` (the cross-revision compatibility probe's types and
verdicts), ``guard`` (what a rollout does with the verdict before it mixes revisions) and ``incluster``
(a RolloutPolicy's ``pdProbe``). The DisaggregatedSet executor is ``rollout/ds.py``. docs/rollout.md,
"Cross-revision P/D compatibility".
"""
