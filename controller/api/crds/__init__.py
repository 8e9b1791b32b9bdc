"""Packaged copies of the upstream LWS/DS, InferencePool and HTTPRoute CRD schemas
(``<plural>.json.gz``, made by scripts/pack_crds.py)."""
