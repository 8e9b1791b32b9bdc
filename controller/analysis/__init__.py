"""Analysis gates: metrics measured over time, judged by safe conditions, new revision against stable.

``spec`` (what a user writes), ``condition`` (its conditions, in CEL), ``evaluate`` (pure judging),
``providers`` (Prometheus / HTTP / command I/O), ``run`` (the measuring loop), ``templates`` (built-in
vLLM and SGLang specs). See docs/analysis.md.
"""
