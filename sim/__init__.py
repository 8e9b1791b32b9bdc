"""Embedded cluster: a virtual-time GPU cluster that behaves like the LWS/DS controllers.

It serves the Kubernetes API over HTTP on loopback (``apiserver``) and can run in-process.
"""
