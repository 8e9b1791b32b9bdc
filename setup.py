"""Install the repository's top-level folders under one ``lwsflow`` namespace.

The design fixes the folders at the repository root: ``controller/``, ``components/``, ``pipelines/``;
beside them the front ends ``cli/``, ``dashboard/`` and ``report/``, and ``sim/`` and ``rehearsal/``.
``package_dir`` maps each onto ``lwsflow.<folder>`` so nothing generic lands in site-packages.
``lwsflow`` itself is a namespace package: it has no folder of its own.

A folder that is absent is left out: the controller image (``Containerfile``) copies only the
product (``controller/``, ``components/``, ``pipelines/``, ``cli/``, ``dashboard/``, ``report/``), so the
embedded cluster (``sim/``) and the tools that rehearse the product on it (``rehearsal/``: demo, local
runs, the reference cluster) never ship.
"""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
FOLDERS = tuple(f for f in ("controller", "components", "pipelines", "cli", "dashboard", "report", "sim",
                                "rehearsal")
                if (HERE / f).is_dir())

setup(
    package_dir={f"lwsflow.{folder}": folder for folder in FOLDERS},
    packages=[f"lwsflow.{folder}{'.' + sub if sub else ''}"
              for folder in FOLDERS for sub in ["", *find_packages(folder)]],
)
