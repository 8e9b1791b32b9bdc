"""Stage hooks: checks that run after a stage's gate and bake (smoke test, metric check, probe).

A hook is any callable ``hook(ctx) -> HookResult | bool``. The engine never imports the smoke test
(``controller`` must not depend on ``components``); the CLI wires ``--smoke`` to it as a callable.
Ready-made hooks here: a command (exit 0 passes) and an HTTP probe (a 2xx passes), both with a
timeout. A hook that raises counts as failed, with the exception as the detail.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

from lwsflow.controller import httpclient
from lwsflow.controller.api.wire import Obj


@dataclass(frozen=True)
class HookContext:
    """What a hook may want to know about the stage that just passed its gate."""

    kind: str
    namespace: str
    name: str
    stage: int  # 1-based
    stages: int
    target_groups: int
    obj: Obj = field(repr=False, default_factory=dict)
    # blue-green: role -> (new LWS, stable LWS) to compare; target_groups is then green's weight (%)
    compare: dict[str, tuple[str, str]] = field(default_factory=dict)
    # a person passed this stage after its analysis paused inconclusive (promote): the analysis is
    # not run again
    accepted: bool = False


@dataclass(frozen=True)
class HookResult:
    ok: bool
    detail: str = ""
    # what the check measured, one dict per measurement (analysis); kept in the stage's report record
    records: list[dict[str, object]] = field(default_factory=list)
    # with ok False: no decision either way (an inconclusive analysis under ``onInconclusive:
    # pause``): the rollout pauses for a person instead of failing the stage
    pause: bool = False


Hook = Callable[[HookContext], "HookResult | bool"]


def run_hook(hook: Hook, ctx: HookContext) -> HookResult:
    """Call a hook, turning a bool or an exception into a HookResult."""
    name = getattr(hook, "__name__", type(hook).__name__)
    try:
        res = hook(ctx)
    except Exception as exc:  # a hook's crash is a failed check, not a controller crash
        return HookResult(False, f"{name}: {type(exc).__name__}: {exc}")
    if isinstance(res, HookResult):
        return res
    return HookResult(bool(res), f"{name}: {'passed' if res else 'failed'}")


def command_hook(argv: list[str], timeout_s: float = 300.0) -> Hook:
    """Run ``argv`` with LWSFLOW_* stage variables in the environment; exit code 0 passes."""
    def hook(ctx: HookContext) -> HookResult:
        env = dict(os.environ, LWSFLOW_NAMESPACE=ctx.namespace, LWSFLOW_NAME=ctx.name,
                   LWSFLOW_KIND=ctx.kind, LWSFLOW_STAGE=str(ctx.stage),
                   LWSFLOW_STAGES=str(ctx.stages), LWSFLOW_TARGET_GROUPS=str(ctx.target_groups))
        try:
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout_s,
                                  check=False)
        except subprocess.TimeoutExpired:
            return HookResult(False, f"{argv[0]}: timed out after {timeout_s:g}s")
        except OSError as exc:
            return HookResult(False, f"{argv[0]}: {exc}")
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
        return HookResult(proc.returncode == 0, f"{argv[0]}: exit {proc.returncode} {tail[0][:200]}")
    hook.__name__ = f"command:{argv[0] if argv else '?'}"
    return hook


def http_probe(url: str, timeout_s: float = 10.0) -> Hook:
    """GET ``url``; any 2xx passes."""
    def hook(ctx: HookContext) -> HookResult:
        import httpx

        try:
            resp = httpclient.shared().get(url, timeout=timeout_s)
        except httpx.HTTPError as exc:
            return HookResult(False, f"{url}: {type(exc).__name__}: {exc}"[:300])
        if resp.is_success:
            return HookResult(True, f"{url}: HTTP {resp.status_code}")
        # the server's own words: the first line of its body
        body = (resp.text.strip().splitlines() or [""])[0][:200]
        return HookResult(False, f"{url}: HTTP {resp.status_code} {resp.reason_phrase}"
                          + (f": {body}" if body else ""))
    hook.__name__ = f"http:{url}"
    return hook
