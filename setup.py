"""Install the repository's top-level folders under one ``lwsflow`` namespace.

The design fixes the folders (``controller/``, ``components/``, ``pipelines/``, ``sim/``) at the
repository root; ``package_dir`` maps each onto ``lwsflow.<folder>`` so nothing generic lands in
site-packages. ``lwsflow`` itself is a namespace package: it has no folder of its own.
"""

from setuptools import find_packages, setup

FOLDERS = ("controller", "components", "pipelines", "sim")

setup(
    package_dir={f"lwsflow.{folder}": folder for folder in FOLDERS},
    packages=[f"lwsflow.{folder}{'.' + sub if sub else ''}"
              for folder in FOLDERS for sub in ["", *find_packages(folder)]],
)
