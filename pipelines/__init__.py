"""Pipelines that chain lwsflow's components (kfp v2 and Argo Workflows via hera)."""
