"""The tools that rehearse the product on one machine, beside it and never shipped with it.

Everything here needs the embedded cluster (``lwsflow.sim``) or the reference cluster: the local
stack and the kfp local runner (``local_run``), ``lwsflow demo`` (``demo``, ``demo_controller``,
``demo_pictures``), a catalog's node pools as an embedded-cluster config (``catalog_cluster``), the
reference-cluster launcher (``refcluster/``) and their commands (``cli/``). The controller image
(``Containerfile``) copies neither this folder nor ``sim/``; no shipped package imports either
(tests/repo/unit/test_layering.py), and ``lwsflow.cli`` registers these commands only when they are
installed.
"""
