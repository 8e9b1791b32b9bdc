"""The ``deploy-model`` pipeline, for Kubeflow Pipelines (kfp v2) and Argo Workflows (hera).

    build-image ─▶ render ─▶ build-overlays ─▶ promote (source env) ─▶ rollout ─▶ smoke-test
        ─▶ promote (source → target env), only when every gate passed

``source_env`` and ``target_env`` default to the catalog's own environment order: its first
environment, then the next one (a catalog with one environment promotes nowhere, and says so).
The render step resolves them; every later step takes them from its outputs.

Both definitions are the same DAG over the same step functions (:mod:`lwsflow.components.steps`). Secrets (git
credentials, registry credentials, the endpoints' API token) reach steps as environment variables
from Kubernetes Secrets, never as parameters. The smoke test runs in the GPU node pool: its node
selector and tolerations are a compile-time setting (:mod:`lwsflow.components.step_placement`).
"""


from typing import Any

from kfp import dsl
from kfp import kubernetes as kfp_k8s

from lwsflow.components import hera_templates as ht
from lwsflow.components import kfp_components as kc
from lwsflow.components.step_placement import DEFAULT_PLACEMENT, StepPlacement

PIPELINE_NAME = "deploy-model"


# -- Kubeflow Pipelines --------------------------------------------------------------------------------
def _secrets(task: dsl.PipelineTask, *secrets: tuple[str, dict[str, str]]) -> None:
    for name, keys in secrets:
        kfp_k8s.use_secret_as_env(task, secret_name=name, secret_key_to_env=keys, optional=True)


def _place(task: dsl.PipelineTask, placement: StepPlacement) -> None:
    """Pin a step to the GPU pool (kfp-kubernetes: node selector and tolerations on its pod)."""
    for key, value in placement.node_selector.items():
        kfp_k8s.add_node_selector(task, label_key=key, label_value=value)
    for tol in placement.tolerations:
        kfp_k8s.add_toleration(task, key=tol.key, operator=tol.operator, value=tol.value or None,
                               effect=tol.effect)


def kfp_pipeline(placement: StepPlacement = DEFAULT_PLACEMENT) -> Any:
    """The kfp ``deploy-model`` pipeline with the GPU-pool steps placed by ``placement``."""

    @dsl.pipeline(name=PIPELINE_NAME,
                  description="Build, render, validate, promote, roll out in stages, smoke-test, promote on.")
    def deploy_model(
        model: str,
        repo_url: str,
        image: str,
        catalog: str = "catalog.yaml",
        image_context: str = "images/engine",
        source_env: str = "",
        target_env: str = "",
        stages: str = "",
        kubeconfig: str = "",
        report_dir: str = "",
    ) -> None:
        """Parameters: what to deploy (model, catalog, image context, image push target), where (repo URL,
        environments: empty source_env is the catalog's first environment, empty target_env the one
        after source_env in the catalog's order; kubeconfig: empty in a cluster, the pod's service
        account), how (rollout stages; empty: the stages the catalog renders for the environment)."""
        build = kc.build_image(repo_url=repo_url, context=image_context, image=image, report_dir=report_dir)
        build.set_display_name("build-image").set_retry(num_retries=2, backoff_duration="10s")
        _secrets(build, ht.GIT_SECRET, ht.REGISTRY_SECRET)

        rendered = kc.render(repo_url=repo_url, catalog=catalog, model=model, env=source_env,
                             target=target_env, image=build.outputs["image"], report_dir=report_dir)
        rendered.set_display_name("render").set_retry(num_retries=2, backoff_duration="10s")
        _secrets(rendered, ht.GIT_SECRET)

        source = rendered.outputs["env"]
        checked = kc.build_overlays(repo_url=repo_url, commit=rendered.outputs["commit"], env=source,
                                    model=model, report_dir=report_dir)
        checked.set_display_name("build-overlays").set_retry(num_retries=2, backoff_duration="10s")
        _secrets(checked, ht.GIT_SECRET)

        to_source = kc.promote(repo_url=repo_url, model=model, target=source, source="",
                               commit=rendered.outputs["commit"], report_dir=report_dir)
        to_source.set_display_name("promote-source").after(checked)
        _secrets(to_source, ht.GIT_SECRET)

        rolled = kc.rollout(repo_url=repo_url, commit=to_source.outputs["commit"], env=source,
                            model=model, stages=stages, kubeconfig=kubeconfig, report_dir=report_dir)
        rolled.set_display_name("rollout")
        _secrets(rolled, ht.GIT_SECRET)

        smoke = kc.smoke_test(target=rolled.outputs["target"], namespace=rolled.outputs["namespace"],
                              kubeconfig=kubeconfig, report_dir=report_dir)
        smoke.set_display_name("smoke-test").set_retry(num_retries=2, backoff_duration="10s")
        _secrets(smoke, ht.API_TOKEN_SECRET)
        _place(smoke, placement)

        with dsl.If(smoke.output == True, name="all-gates-passed"):  # noqa: E712 (a kfp expression)
            to_target = kc.promote(repo_url=repo_url, model=model, target=rendered.outputs["target"],
                                   source=source, commit="", report_dir=report_dir)
            to_target.set_display_name("promote-target")
            _secrets(to_target, ht.GIT_SECRET)

        for task in (build, rendered, checked, to_source, rolled, smoke, to_target):
            task.set_caching_options(False)  # every step has side effects (registry, git, cluster)

    return deploy_model


deploy_model = kfp_pipeline()  # the default placement: what pipelines/dist holds and local runs execute


# -- Argo Workflows (hera) -------------------------------------------------------------------------------
ARGO_PARAMETERS: dict[str, str | None] = {
    "model": None, "repo_url": None, "image": None, "catalog": "catalog.yaml",
    "image_context": "images/engine", "source_env": "", "target_env": "",
    "stages": "", "kubeconfig": "", "report_dir": "",
}


def _p(name: str) -> str:
    return "{{workflow.parameters.%s}}" % name  # noqa: UP031 (Argo template braces)


def _out(task: str, name: str) -> str:
    return "{{tasks.%s.outputs.parameters.%s}}" % (task, name)  # noqa: UP031


def argo_workflow_template(placement: StepPlacement = DEFAULT_PLACEMENT) -> Any:
    """The same DAG as an Argo ``WorkflowTemplate`` (a hera object; ``.to_dict()`` for YAML)."""
    from hera.workflows import DAG, Parameter, WorkflowTemplate

    params = [Parameter(name=k, value=v) if v is not None else Parameter(name=k)
              for k, v in ARGO_PARAMETERS.items()]
    with WorkflowTemplate(name=PIPELINE_NAME, entrypoint="deploy", on_exit="report",
                          arguments=params, service_account_name="lwsflow-pipeline",
                          labels={"app.kubernetes.io/part-of": "lwsflow"}) as wt:
        ht.report(arguments={"status": "{{workflow.status}}", "failures": "{{workflow.failures}}",
                             "model": _p("model")})
        with DAG(name="deploy"):
            build = ht.build_image(name="build-image", arguments={
                "repo_url": _p("repo_url"), "context": _p("image_context"), "image": _p("image"),
                "report_dir": _p("report_dir")})
            render = ht.render(name="render", arguments={
                "repo_url": _p("repo_url"), "catalog": _p("catalog"), "model": _p("model"),
                "env": _p("source_env"), "target": _p("target_env"), "image": _out("build-image", "image"),
                "report_dir": _p("report_dir")})
            source = _out("render", "env")
            check = ht.build_overlays(name="build-overlays", arguments={
                "repo_url": _p("repo_url"), "commit": _out("render", "commit"), "env": source,
                "model": _p("model"), "report_dir": _p("report_dir")})
            to_source = ht.promote(name="promote-source", arguments={
                "repo_url": _p("repo_url"), "model": _p("model"), "target": source, "source": "",
                "commit": _out("render", "commit"), "report_dir": _p("report_dir")})
            rolled = ht.rollout(name="rollout", arguments={
                "repo_url": _p("repo_url"), "commit": _out("promote-source", "commit"),
                "env": source, "model": _p("model"), "stages": _p("stages"),
                "kubeconfig": _p("kubeconfig"), "report_dir": _p("report_dir")})
            smoke = ht.smoke_test_template(placement)(name="smoke-test", arguments={
                "target": _out("rollout", "target"), "namespace": _out("rollout", "namespace"),
                "kubeconfig": _p("kubeconfig"), "report_dir": _p("report_dir")})
            to_target = ht.promote(name="promote-target", when=f"{_out('smoke-test', 'passed')} == true",
                                   arguments={
                "repo_url": _p("repo_url"), "model": _p("model"), "target": _out("render", "target"),
                "source": source, "commit": "", "report_dir": _p("report_dir")})
            build >> render >> check >> to_source >> rolled >> smoke >> to_target
    return wt
