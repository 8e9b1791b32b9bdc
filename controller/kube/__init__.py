"""Thin access layer over the official ``kubernetes`` client.

It loads kubeconfig or in-cluster config, retries with backoff and jitter (honouring Retry-After),
resumes watches from the last resourceVersion (relisting on 410 Gone), records Events, and
translates ``ApiException`` into :mod:`lwsflow.controller.errors` ApiError subclasses at this boundary, so
nothing above it ever sees the client's exception types.
"""
