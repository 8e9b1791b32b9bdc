"""Kubeflow Pipelines v2 components: the deploy-model steps, run in the lwsflow image.

Each component is a lightweight Python component whose body only calls the matching function in
:mod:`lwsflow.components.steps` and hands its fields back as named outputs: no logic lives here. The lwsflow
image has lwsflow installed, so ``install_kfp_package=False`` (nothing is pip-installed at run time;
offline, a pip install would fail). kfp copies these bodies into the pipeline spec, hence the imports
inside each function.
"""


from typing import NamedTuple

from kfp import dsl

# The image the steps run in (built from the repository's Containerfile).
LWSFLOW_IMAGE = "ghcr.io/lwsflow/lwsflow:0.1.0"


@dsl.component(base_image=LWSFLOW_IMAGE, install_kfp_package=False)
def build_image(repo_url: str, context: str, image: str, report_dir: str) -> NamedTuple(
        "BuildImageOutputs", [("image", str), ("digest", str)]):
    """Build and push the serving image; outputs the reference pinned by registry digest."""
    from lwsflow.components import steps

    out = steps.build_image(repo_url=repo_url, context=context, image=image, report_dir=report_dir)
    return (out.image, out.digest)


@dsl.component(base_image=LWSFLOW_IMAGE, install_kfp_package=False)
def render(repo_url: str, catalog: str, model: str, env: str, target: str, image: str,
           report_dir: str) -> NamedTuple(
        "RenderOutputs", [("commit", str), ("branch", str), ("env", str), ("target", str)]):
    """Render the catalog and pin the digest for the environment on a release branch; outputs the
    source and target environments resolved in the catalog's order."""
    from lwsflow.components import steps

    out = steps.render(repo_url=repo_url, catalog=catalog, model=model, env=env, target=target, image=image,
                       report_dir=report_dir)
    return (out.commit, out.branch, out.env, out.target)


@dsl.component(base_image=LWSFLOW_IMAGE, install_kfp_package=False)
def build_overlays(repo_url: str, commit: str, env: str, model: str, report_dir: str) -> NamedTuple(
        "BuildOverlaysOutputs", [("objects", int), ("manifest_sha256", str)]):
    """Kustomize-build and validate the environment's overlays at the release commit."""
    from lwsflow.components import steps

    out = steps.build_overlays(repo_url=repo_url, commit=commit, env=env, model=model, report_dir=report_dir)
    return (out.objects, out.manifest_sha256)


@dsl.component(base_image=LWSFLOW_IMAGE, install_kfp_package=False)
def promote(repo_url: str, model: str, target: str, source: str, commit: str, report_dir: str) -> NamedTuple(
        "PromoteOutputs", [("commit", str)]):
    """Publish a release commit on main (no source) or promote source -> target through git."""
    from lwsflow.components import steps

    out = steps.promote(repo_url=repo_url, model=model, target=target, source=source, commit=commit,
                        report_dir=report_dir)
    return (out.commit,)


@dsl.component(base_image=LWSFLOW_IMAGE, install_kfp_package=False)
def rollout(repo_url: str, commit: str, env: str, model: str, stages: str, kubeconfig: str,
            report_dir: str) -> NamedTuple(
        "RolloutOutputs", [("target", str), ("namespace", str), ("stages_passed", int),
                           ("makespan_s", float)]):
    """Staged rollout of what the environment pins at the commit; fails after a rollback."""
    from lwsflow.components import steps

    out = steps.rollout(repo_url=repo_url, commit=commit, env=env, model=model, stages=stages,
                        kubeconfig=kubeconfig, report_dir=report_dir)
    return (out.target, out.namespace, out.stages_passed, out.makespan_s)


@dsl.component(base_image=LWSFLOW_IMAGE, install_kfp_package=False)
def smoke_test(target: str, namespace: str, kubeconfig: str, report_dir: str) -> bool:
    """Smoke-test the new revision's endpoints; fails when any check fails, else outputs True.

    One unnamed output on purpose: the kfp local runner resolves a ``dsl.If`` on a task's ``Output``
    but not on a named output (kfp 2.17), and the pipeline gates the promotion on this value.
    """
    from lwsflow.components import steps

    return steps.smoke_test(target=target, namespace=namespace, kubeconfig=kubeconfig,
                            report_dir=report_dir).passed
