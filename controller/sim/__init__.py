"""Embedded cluster: a virtual-time GPU cluster that behaves like the LWS/DS controllers and serves the Kubernetes API."""
