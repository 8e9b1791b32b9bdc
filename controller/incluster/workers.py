"""The controller's rollout threads: at most one per policy, each on its own fenced view of the
connection, its outcome counted and logged, a refusal remembered for the status and the retry window.

A rollout blocks on its waits (gates, bakes, analysis), so each runs on its own thread and one slow
gate never holds another policy. Each gets its own view of the connection: its own request counter
(its report counts its requests, and ``written`` lets the next reconcile wait for its last writes) and
a fence that refuses its writes once it is stopped (its policy deleted, the controller stopping).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from lwsflow.controller.errors import ApiError, Fenced, InvalidInput
from lwsflow.controller.incluster import decide
from lwsflow.controller.incluster.metrics import Metrics
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.controller.rollout.outcome import Outcome

log = logging.getLogger("lwsflow.controller")

# what a policy's rollout thread runs, built on the thread's own connection view and stop event
Make = Callable[[Kube, threading.Event], Callable[[], Outcome | None]]


@dataclass
class Worker:
    thread: threading.Thread
    stop: threading.Event  # set when the policy is deleted or the controller stops: writes fenced
    kube: Kube  # its own view: fenced on ``stop``, counting its requests, remembering what it wrote
    generation: int  # the policy generation the rollout runs under
    spec: RolloutPolicySpec


@dataclass
class Workers:
    kube: Kube  # the controller's (leadership-fenced) connection; each worker gets a view of it
    metrics: Metrics
    wake: Callable[[str], None]  # reconcile a policy again (its rollout ended)
    running: dict[str, Worker] = field(default_factory=dict)
    refusals: dict[str, str] = field(default_factory=dict)  # policy -> why its rollout could not start
    refused: dict[str, decide.Refusal] = field(default_factory=dict)  # partition rollouts refused up front

    def __contains__(self, key: object) -> bool:
        return key in self.running

    def get(self, key: str) -> Worker | None:
        return self.running.get(key)

    def values(self) -> Iterator[Worker]:
        return iter(list(self.running.values()))

    def alive(self, key: str) -> Worker | None:
        """The policy's rollout while its thread runs, else None."""
        worker = self.running.get(key)
        return worker if worker is not None and worker.thread.is_alive() else None

    def idle(self, key: str) -> bool:
        """No rollout of this policy runs (an ended one is dropped here; the controller waits for its
        last writes in the cache before deciding again)."""
        worker = self.running.get(key)
        if worker is None:
            return True
        if worker.thread.is_alive():
            return False
        del self.running[key]
        return True

    def spawn(self, key: str, generation: int, spec: RolloutPolicySpec, make: Make, *,
              hold: tuple[str, int] | None = None) -> None:
        """Run one rollout on its own thread. ``hold`` (templates key, generation): a refusal up front
        holds these templates under this generation until they change or the retry window ends."""
        stop = threading.Event()
        kube = self.kube.view(fence=lambda: "the rollout was stopped (policy deleted or controller "
                                            "stopping)" if stop.is_set() else None)
        run = make(kube, stop)

        def work() -> None:
            try:
                out = run()
                if out is not None:
                    self.metrics.rollouts.labels(outcome=out.result).inc()
                    self.metrics.record_report(out.report)
                    log.info("%s: %s", key, out.message)
            except Fenced as exc:  # stopped, or no longer provably the leader: held where it is
                log.info("%s: rollout stopped: %s", key, exc)
            except ApiError as exc:  # e.g. 403 from RBAC: one line; the next pass tries again
                log.warning("%s: rollout: %s", key, exc)
                self.metrics.reconcile_errors.inc()
            except InvalidInput as exc:  # e.g. no room for a green pair: shown in the status, retried
                log.warning("%s: rollout refused: %s", key, exc)
                self.refusals[key] = str(exc)
                if hold is not None:  # held until the templates or the policy change, or the retry window
                    self.refused[key] = decide.Refusal(*hold, time.monotonic(), str(exc))
                self.metrics.reconcile_errors.inc()
            except Exception:  # a driver's crash must not take the controller down; the state is safe
                log.exception("%s: rollout driver failed", key)
                self.metrics.reconcile_errors.inc()
            finally:
                self.wake(key)

        t = threading.Thread(target=work, name=f"rollout-{key}", daemon=True)
        self.running[key] = Worker(t, stop, kube, generation, spec)
        t.start()

    def stop(self, key: str) -> bool:
        """Stop a deleted policy's rollout (its writes fenced from now on) and forget what was
        remembered of it; whether a rollout was running."""
        worker = self.running.pop(key, None)
        self.refusals.pop(key, None)
        self.refused.pop(key, None)
        if worker is not None and worker.thread.is_alive():
            worker.stop.set()
            return True
        return False

    def stop_all(self) -> None:
        for worker in list(self.running.values()):
            worker.stop.set()
