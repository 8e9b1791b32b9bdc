"""The reference cluster: kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok and the
upstream LWS controller built from Go modules (``scripts/build-refcluster``) and run on 127.0.0.1.

It is the conformance tier's oracle for the embedded cluster (``make conformance``); see
docs/reference-cluster.md. ``launcher`` starts and stops it; ``kwok_stages`` is the pod lifecycle.
"""
