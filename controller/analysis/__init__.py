"""Analysis gates: metrics measured over time, judged by safe conditions, new revision against stable.

``spec`` (what a user writes), ``condition`` (its conditions, in CEL), ``evaluate`` (pure judging),
``providers`` (Prometheus / HTTP / command I/O), ``run`` (the measuring loop), ``templates`` (built-in
vLLM and SGLang specs), ``incluster`` (a RolloutPolicy's analysis in the controller) and ``status``
(its record in the policy's status). See docs/analysis.md.
"""
