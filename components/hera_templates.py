"""Argo Workflows script templates (hera) for the deploy-model steps, run in the lwsflow image.

Like the kfp components, each body only calls :mod:`lwsflow.components.steps` and writes the step's fields as
output parameters (``/tmp/outputs/<field>``); no logic lives here. Argo runs *inline* scripts: hera
copies the function body into the template, so a ``return`` would be lost; the outputs go to files.
Outside a workflow context, calling one of these functions runs its body locally (hera's behaviour).

Idempotent steps (build-image: same context, same digest; render; build-overlays; smoke-test) retry
on failure with backoff; promote and rollout do not (promote retries its own git race internally,
and a rollout that failed has already rolled back: re-running it would roll forward again).
"""


from collections.abc import Callable
from typing import Any

from hera.workflows import Parameter, RetryStrategy, SecretEnv, script
from hera.workflows.models import Backoff, Toleration, ValueFrom

from lwsflow.components.kfp_components import LWSFLOW_IMAGE
from lwsflow.components.step_placement import DEFAULT_PLACEMENT, StepPlacement

OUTPUTS_DIR = "/tmp/outputs"
# Secret name -> {key in the secret: environment variable}. Values never pass as parameters.
GIT_SECRET = ("lwsflow-git", {"username": "GIT_USERNAME", "password": "GIT_PASSWORD"})
REGISTRY_SECRET = ("lwsflow-registry", {"username": "REGISTRY_USERNAME", "password": "REGISTRY_PASSWORD"})
API_TOKEN_SECRET = ("lwsflow-api-token", {"token": "LWSFLOW_API_TOKEN"})


def secret_env(*secrets: tuple[str, dict[str, str]]) -> list[SecretEnv]:
    """Environment variables filled from Kubernetes Secrets (optional: a public repo needs none)."""
    return [SecretEnv(name=env, secret_name=name, secret_key=key, optional=True)
            for name, keys in secrets for key, env in keys.items()]


def outputs(*names: str) -> list[Parameter]:
    return [Parameter(name=n, value_from=ValueFrom(path=f"{OUTPUTS_DIR}/{n}")) for n in names]


# IntOrString fields as strings: the Argo JSON schema types them "string" (the server takes both).
RETRY = RetryStrategy(limit="2", retry_policy="Always", backoff=Backoff(duration="10s", factor="2"))


@script(name="build-image", image=LWSFLOW_IMAGE, retry_strategy=RETRY, outputs=outputs("image", "digest"),
        env=secret_env(GIT_SECRET, REGISTRY_SECRET))
def build_image(repo_url: str, context: str, image: str, report_dir: str) -> None:
    from lwsflow.components import steps

    steps.write_outputs(steps.build_image(repo_url=repo_url, context=context, image=image,
                                          report_dir=report_dir))


@script(name="render", image=LWSFLOW_IMAGE, retry_strategy=RETRY,
        outputs=outputs("commit", "branch", "env", "target"), env=secret_env(GIT_SECRET))
def render(repo_url: str, catalog: str, model: str, env: str, target: str, image: str,
           report_dir: str) -> None:
    from lwsflow.components import steps

    steps.write_outputs(steps.render(repo_url=repo_url, catalog=catalog, model=model, env=env, target=target,
                                     image=image, report_dir=report_dir))


@script(name="build-overlays", image=LWSFLOW_IMAGE, retry_strategy=RETRY,
        outputs=outputs("objects", "manifest_sha256"), env=secret_env(GIT_SECRET))
def build_overlays(repo_url: str, commit: str, env: str, model: str, report_dir: str) -> None:
    from lwsflow.components import steps

    steps.write_outputs(steps.build_overlays(repo_url=repo_url, commit=commit, env=env, model=model,
                                             report_dir=report_dir))


@script(name="promote", image=LWSFLOW_IMAGE, outputs=outputs("commit"), env=secret_env(GIT_SECRET))
def promote(repo_url: str, model: str, target: str, source: str, commit: str, report_dir: str) -> None:
    from lwsflow.components import steps

    steps.write_outputs(steps.promote(repo_url=repo_url, model=model, target=target, source=source,
                                      commit=commit, report_dir=report_dir))


@script(name="rollout", image=LWSFLOW_IMAGE, outputs=outputs("target", "namespace", "stages_passed"),
        env=secret_env(GIT_SECRET))
def rollout(repo_url: str, commit: str, env: str, model: str, stages: str, kubeconfig: str,
            report_dir: str) -> None:
    from lwsflow.components import steps

    steps.write_outputs(steps.rollout(repo_url=repo_url, commit=commit, env=env, model=model, stages=stages,
                                      kubeconfig=kubeconfig, report_dir=report_dir))


def _smoke_test(target: str, namespace: str, kubeconfig: str, report_dir: str) -> None:
    from lwsflow.components import steps

    steps.write_outputs(steps.smoke_test(target=target, namespace=namespace, kubeconfig=kubeconfig,
                                         report_dir=report_dir))


def smoke_test_template(placement: StepPlacement = DEFAULT_PLACEMENT) -> Callable[..., Any]:
    """The smoke-test template, placed in the GPU pool by ``placement`` (a compile-time setting)."""
    tolerations = [Toleration(key=t.key, operator=t.operator, value=t.value or None, effect=t.effect)
                   for t in placement.tolerations]
    return script(name="smoke-test", image=LWSFLOW_IMAGE, retry_strategy=RETRY, outputs=outputs("passed"),
                  env=secret_env(API_TOKEN_SECRET), node_selector=dict(placement.node_selector) or None,
                  tolerations=tolerations or None)(_smoke_test)


smoke_test = smoke_test_template()


@script(name="report", image=LWSFLOW_IMAGE)
def report(status: str, failures: str, model: str) -> None:
    """The onExit handler: one JSON line with the outcome, for log shipping and alerting."""
    import json

    print(json.dumps({"pipeline": "deploy-model", "model": model, "status": status, "failures": failures}))
