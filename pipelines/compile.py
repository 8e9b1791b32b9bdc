"""Compile ``deploy-model`` to ``DIR/deploy-model.kfp.yaml`` (kfp IR) and ``DIR/deploy-model.argo.yaml``.

The committed copies live in ``pipelines/dist/``; a test recompiles and compares, so the YAML that
platform teams upload can never drift from the Python source. Compiling needs no network. The
committed copies use the default GPU-pool placement (``step_placement.DEFAULT_PLACEMENT``);
``placement`` compiles for another pool.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from lwsflow.components.atomic import write_file_atomic
from lwsflow.components.step_placement import DEFAULT_PLACEMENT, StepPlacement
from lwsflow.controller.yamlio import dump_yaml
from lwsflow.pipelines.deploy_model import PIPELINE_NAME, argo_workflow_template, kfp_pipeline

DIST = Path(__file__).resolve().parent / "dist"


def compile_kfp(path: Path, placement: StepPlacement = DEFAULT_PLACEMENT) -> Path:
    """Write the kfp v2 pipeline spec (IR YAML, with the kfp-kubernetes platform spec)."""
    from kfp import compiler

    with tempfile.TemporaryDirectory() as tmp:  # kfp writes only to a path; then write-then-rename
        out = Path(tmp) / path.name
        compiler.Compiler().compile(kfp_pipeline(placement), package_path=str(out))
        write_file_atomic(path, out.read_bytes())
    return path


def argo_manifest(placement: StepPlacement = DEFAULT_PLACEMENT) -> dict:
    """The WorkflowTemplate as a plain dict (Argo's wire form)."""
    return argo_workflow_template(placement).to_dict()


def compile_argo(path: Path, placement: StepPlacement = DEFAULT_PLACEMENT) -> Path:
    """Write the Argo ``WorkflowTemplate`` YAML (atomically, like the kfp file)."""
    write_file_atomic(path, dump_yaml(argo_manifest(placement)).encode())
    return path


def compile_all(out_dir: Path, placement: StepPlacement = DEFAULT_PLACEMENT) -> list[Path]:
    """Both files into ``out_dir``; returns their paths."""
    return [compile_kfp(out_dir / f"{PIPELINE_NAME}.kfp.yaml", placement),
            compile_argo(out_dir / f"{PIPELINE_NAME}.argo.yaml", placement)]


if __name__ == "__main__":
    for p in compile_all(DIST):
        print(p)
