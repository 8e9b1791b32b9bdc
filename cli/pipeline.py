"""Pipeline commands: ``pipeline compile|submit`` and ``build-image`` (``demo`` is a rehearsal command:
``lwsflow.rehearsal.cli.demo``).

``pipeline submit`` sends the compiled pipeline to a Kubeflow Pipelines endpoint (``--kfp-host`` or
``$KFP_HOST``) or creates the Argo ``WorkflowTemplate`` on an Argo Server (``--argo-host`` or
``$ARGO_SERVER``, token in ``$ARGO_TOKEN``). It needs a real cluster and is not exercised here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from lwsflow.cli.app import app
from lwsflow.controller.errors import InvalidInput

pipeline_app = typer.Typer(help="Compile and submit the deploy-model pipeline (kfp and Argo).",
                           no_args_is_help=True)
app.add_typer(pipeline_app, name="pipeline")


# GPU-pool placement of the steps that need it (the smoke test): shared by compile and submit.
NodeSelectorOpt = Annotated[list[str] | None, typer.Option(
    "--node-selector", metavar="KEY=VALUE",
    help="node selector of the steps that run in the GPU pool (the smoke test); repeatable. "
         "Default: the example catalog's H100 pool, cloud.google.com/gke-accelerator=nvidia-h100-80gb")]
TolerationOpt = Annotated[list[str] | None, typer.Option(
    "--toleration", metavar="KEY[=VALUE]:EFFECT",
    help="toleration of those steps (no VALUE: operator Exists); repeatable. "
         "Default: nvidia.com/gpu:NoSchedule. Giving either flag replaces the whole default")]
AnyNodeOpt = Annotated[bool, typer.Option(
    "--any-node", help="no node selector or tolerations: the smoke test runs on any node")]


@pipeline_app.command("compile")
def compile_cmd(
    out: Annotated[Path, typer.Option("--out", help="folder for deploy-model.kfp.yaml and .argo.yaml")],
    node_selector: NodeSelectorOpt = None,
    toleration: TolerationOpt = None,
    any_node: AnyNodeOpt = False,
) -> None:
    """Compile deploy-model to kfp IR YAML and an Argo WorkflowTemplate (offline, milliseconds)."""
    from lwsflow.components.step_placement import placement_from_flags
    from lwsflow.pipelines.compile import compile_all

    placement = placement_from_flags(node_selector or [], toleration or [], any_node)
    for path in compile_all(out, placement):
        print(path)


def run_arguments(model: str, repo_url: str, image: str, stages: str = "", source_env: str = "",
                  target_env: str = "") -> dict[str, str]:
    """The run's parameters; ``stages`` and the environments only when given, so the pipeline's
    defaults (empty: the catalog's stages; the catalog's first environment, then the next) apply
    otherwise."""
    args = {"model": model, "repo_url": repo_url, "image": image}
    for key, value in (("stages", stages), ("source_env", source_env), ("target_env", target_env)):
        if value.strip():
            args[key] = value.strip()
    return args


@pipeline_app.command("submit")
def submit_cmd(
    model: Annotated[str, typer.Option("--model", help="catalog model to deploy")],
    repo_url: Annotated[str, typer.Option("--repo-url", help="the GitOps repository")],
    image: Annotated[str, typer.Option("--image", help="push target, registry/repository:tag")],
    kfp_host: Annotated[str, typer.Option("--kfp-host", envvar="KFP_HOST", help="KFP API endpoint")] = "",
    argo_host: Annotated[str, typer.Option("--argo-host", envvar="ARGO_SERVER", help="Argo Server URL")] = "",
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="Argo namespace")] = "argo",
    stages: Annotated[str, typer.Option(
        "--stages",
        help="rollout stages, e.g. 1,50%,100% (default: the catalog's for the environment)")] = "",
    source_env: Annotated[str, typer.Option(
        "--source-env", help="environment to release to (default: the catalog's first)")] = "",
    target_env: Annotated[str, typer.Option(
        "--target-env", help="environment to promote to (default: the next in the catalog's order)")] = "",
    node_selector: NodeSelectorOpt = None,
    toleration: TolerationOpt = None,
    any_node: AnyNodeOpt = False,
) -> None:
    """Submit deploy-model to a KFP endpoint or register it on an Argo Server (needs a real cluster)."""
    from lwsflow.components.step_placement import placement_from_flags

    args = run_arguments(model, repo_url, image, stages, source_env, target_env)
    placement = placement_from_flags(node_selector or [], toleration or [], any_node)
    if kfp_host:
        import kfp

        from lwsflow.pipelines.deploy_model import kfp_pipeline

        pipeline = kfp_pipeline(placement)
        run = kfp.Client(host=kfp_host).create_run_from_pipeline_func(pipeline, arguments=args)
        print(f"kfp run {run.run_id}")
    elif argo_host:
        from hera.shared import global_config

        from lwsflow.pipelines.deploy_model import argo_workflow_template

        global_config.host = argo_host
        global_config.token = os.environ.get("ARGO_TOKEN")  # a secret: from the environment, never a flag
        wt = argo_workflow_template(placement)
        wt.namespace = namespace
        wt.create()
        print(f"argo workflowtemplate {namespace}/{wt.name}")
    else:
        raise InvalidInput("no pipeline endpoint: set --kfp-host ($KFP_HOST) or --argo-host ($ARGO_SERVER)",
                           field="kfp-host")


@app.command("build-image")
def build_image_cmd(
    context: Annotated[Path, typer.Argument(help="build context folder (with a Containerfile)")],
    image: Annotated[str, typer.Option("--image", "-t", help="push target, registry/repository:tag")],
    containerfile: Annotated[Path | None, typer.Option("--file", "-f", help="Containerfile")] = None,
) -> None:
    """Build an image with buildah, push it, print the reference pinned by the registry's digest."""
    from lwsflow.components.images import build_image

    built = build_image(context, image, containerfile=containerfile)
    print(json.dumps(built.to_dict(), indent=2))
