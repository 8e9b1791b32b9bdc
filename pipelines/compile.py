"""Compile ``deploy-model`` to ``DIR/deploy-model.kfp.yaml`` (kfp IR) and ``DIR/deploy-model.argo.yaml``.

The committed copies live in ``pipelines/dist/``; a test recompiles and compares, so the YAML that
platform teams upload can never drift from the Python source. Compiling needs no network.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from controller.yamlio import dump_yaml
from pipelines.deploy_model import PIPELINE_NAME, argo_workflow_template, deploy_model

DIST = Path(__file__).resolve().parent / "dist"


def compile_kfp(path: Path) -> Path:
    """Write the kfp v2 pipeline spec (IR YAML, with the kfp-kubernetes platform spec)."""
    from kfp import compiler

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # write-then-rename: a reader never sees half a file
        out = Path(tmp) / path.name
        compiler.Compiler().compile(deploy_model, package_path=str(out))
        path.write_text(out.read_text())
    return path


def argo_manifest() -> dict:
    """The WorkflowTemplate as a plain dict (Argo's wire form)."""
    return argo_workflow_template().to_dict()


def compile_argo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dump_yaml(argo_manifest()))
    tmp.replace(path)
    return path


def compile_all(out_dir: Path) -> list[Path]:
    """Both files into ``out_dir``; returns their paths."""
    return [compile_kfp(out_dir / f"{PIPELINE_NAME}.kfp.yaml"),
            compile_argo(out_dir / f"{PIPELINE_NAME}.argo.yaml")]


if __name__ == "__main__":
    for p in compile_all(DIST):
        print(p)
