"""Typed LWS/DS API (pydantic), CRD-schema and webhook validation, status predicates."""
