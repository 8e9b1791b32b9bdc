"""Packaged copies of the upstream LWS/DS CRD schemas (``<plural>.json.gz``, made by scripts/pack_crds.py)."""
