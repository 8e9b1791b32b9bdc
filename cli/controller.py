"""`lwsflow controller run`: the in-cluster rollout controller (reconciles RolloutPolicies).

    lwsflow controller run [--namespace NS | --all-namespaces] [--leader-elect]
        [--lease-namespace NS] [--lease-duration 15s] [--metrics-addr 127.0.0.1:0]
        [--health-addr 127.0.0.1:0] [--kubeconfig PATH] [--prometheus URL|local] [--cluster-clock]
        [--resync 5m] [--workers 4] [--kube-qps 200] [--kube-burst 400]

The endpoints take free ports unless told (the first line printed names them), so a controller
started beside another one, a dashboard or `sim serve` never fails on a taken port; the Deployment
in overlays/controller names 8080 and 8081, which its probes and kube-rbac-proxy use.

Time is the wall clock; ``--cluster-clock`` (the demo and the tests, against the embedded cluster)
follows the embedded cluster's virtual clock instead (``GET /lwsflow/v1/clock``). Without it the
controller never asks a cluster for that path.

Runs until SIGTERM/SIGINT. With ``--leader-elect`` only the holder of the Lease acts, and every
write (the P/D probe's canaries and the webhook posts included) is fenced on the renew deadline; a
replica that loses the lease exits (its Deployment restarts it as a standby). ``/healthz`` fails
while a reconcile makes no progress or an informer thread has died.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import uuid
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lwsflow.cli.app import app

if TYPE_CHECKING:
    from lwsflow.components.prometheus import Prometheus
    from lwsflow.controller.analysis.incluster import AnalysisFactory
    from lwsflow.controller.incluster.driver import SmokeFactory
    from lwsflow.controller.kube.client import Kube
    from lwsflow.controller.pd.compat import CompatProbe
    from lwsflow.controller.policy.model import SmokeCheck
    from lwsflow.controller.rollout.hooks import Hook

controller_app = typer.Typer(help="The in-cluster rollout controller (RolloutPolicy).", no_args_is_help=True)
app.add_typer(controller_app, name="controller")


def _port(addr: str, what: str) -> int:
    from lwsflow.controller.errors import InvalidInput

    host, _, port = addr.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "") or not port.isdigit() or int(port) > 65535:
        raise InvalidInput(f"{addr!r}: want 127.0.0.1:PORT (servers bind loopback only)", field=what)
    return int(port)


@controller_app.command("run")
def run(
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", help="watch one namespace")] = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A")] = False,
    leader_elect: Annotated[bool, typer.Option("--leader-elect", help="act only while holding the Lease")]
    = False,
    lease_namespace: Annotated[str, typer.Option(help="namespace of the Lease")] = "default",
    lease_name: Annotated[str, typer.Option(help="name of the Lease")] = "lwsflow-controller",
    lease_duration: Annotated[str, typer.Option(help="lease duration (renew deadline 2/3, retry 1/5)")]
    = "15s",
    metrics_addr: Annotated[str, typer.Option(help="127.0.0.1:PORT for /metrics (port 0: a free one, "
                                              "printed)")] = "127.0.0.1:0",
    health_addr: Annotated[str, typer.Option(help="127.0.0.1:PORT for /healthz and /readyz (port 0: a free "
                                             "one, printed)")] = "127.0.0.1:0",
    kubeconfig: Annotated[str | None, typer.Option(help="default: $KUBECONFIG, else in-cluster")] = None,
    resync: Annotated[str, typer.Option(help="safety-net full reconcile this often (events drive the rest)")]
    = "5m",
    workers: Annotated[int, typer.Option(help="reconcile workers (policies reconciled at once)", min=1)] = 4,
    kube_qps: Annotated[float, typer.Option(help="client-side limit on API requests per second (watches "
                                            "apart)", min=1)] = 200.0,
    kube_burst: Annotated[int, typer.Option(help="requests allowed at once above --kube-qps", min=1)] = 400,
    prometheus: Annotated[str | None, typer.Option(help="Prometheus URL for the policies' analysis, or "
                                                    "'local' to run one here that scrapes the watched pods")]
    = None,
    cluster_clock: Annotated[bool, typer.Option(
        "--cluster-clock", help="follow the embedded cluster's virtual clock (`lwsflow sim serve` only: "
                                "bakes and deadlines then pass at its speed)")]
    = False,
) -> int:
    """Reconcile RolloutPolicies: stage every new template of their targets with the rollout engine."""
    from lwsflow.cli.rollout import _configure_logging
    from lwsflow.controller.api.duration import parse_duration
    from lwsflow.controller.clock import WallClock
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.incluster.leader import LeaderElector
    from lwsflow.controller.incluster.manager import Controller
    from lwsflow.controller.incluster.metrics import Endpoints, Metrics
    from lwsflow.controller.incluster.notify import Notifier
    from lwsflow.controller.kube.client import Kube
    from lwsflow.controller.rollout import session

    if namespace and all_namespaces:
        raise InvalidInput("--namespace and --all-namespaces exclude each other", field="namespace")
    lease_s, resync_s = parse_duration(lease_duration, "lease-duration"), parse_duration(resync, "resync")
    if lease_s < 3:
        raise InvalidInput("must be at least 3s", field="lease-duration")
    mport, hport = _port(metrics_addr, "metrics-addr"), _port(health_addr, "health-addr")
    _configure_logging()
    identity = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    kube = Kube.connect(kubeconfig, qps=kube_qps, burst=kube_burst)
    kube.api.user_agent = f"lwsflow-controller/{identity}"  # the API server's audit names the replica
    clock = session.cluster_clock(kube) if cluster_clock else WallClock()
    metrics = Metrics()
    stop = threading.Event()

    def lost() -> None:  # never keep acting without the lease: exit, the restart is a standby
        print(f"lwsflow controller {identity}: leader election lost; exiting", file=sys.stderr, flush=True)
        os._exit(1)

    lease_kube = Kube.connect(kubeconfig)  # its own connection: renewals never queue behind rollouts
    lease_kube.api.user_agent = kube.api.user_agent
    leader = LeaderElector(lease_kube, lease_namespace, lease_name, identity, lease_duration_s=lease_s,
                           renew_deadline_s=lease_s * 2 / 3, retry_period_s=lease_s / 5,
                           on_lost=lost) if leader_elect else None
    watched = None if all_namespaces else (namespace or "default")
    local = _local_prometheus(kube, watched) if prometheus == "local" else None
    notifier = Notifier(kube)
    ctl = Controller(kube, clock, namespace=watched,
                     leader=leader, metrics=metrics, notifier=notifier, smoke=_smoke(kubeconfig),
                     analysis=_analysis(kube, kubeconfig, local.url if local else prometheus, local),
                     pd_probe=_pd_probe(),
                     resync_s=resync_s, stop=stop, worker_count=workers)
    try:  # a taken port is one line naming the flag, not a traceback
        where = "metrics-addr"
        mep = Endpoints(mport, metrics, ready=ctl.is_ready, healthy=ctl.healthy).start()
        where = "health-addr"
        hep = mep if hport == mport and mport else Endpoints(hport, metrics, ready=ctl.is_ready,
                                                             healthy=ctl.healthy).start()
    except OSError as exc:
        if local is not None:
            local.stop()
        addr = metrics_addr if where == "metrics-addr" else health_addr
        raise InvalidInput(f"cannot listen on {addr}: {exc.strerror or exc}", field=where) from None
    print(f"lwsflow controller {identity}: metrics http://127.0.0.1:{mep.port}/metrics, health "
          f"http://127.0.0.1:{hep.port}/healthz; watching "
          f"{'all namespaces' if ctl.namespace is None else ctl.namespace}"
          f"{'; leader election on lease ' + lease_namespace + '/' + lease_name if leader else ''}",
          flush=True)

    def on_signal(_sig: int, _frame: object) -> None:
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if leader is not None:
        threading.Thread(target=leader.run, name="leader", daemon=True).start()
    try:
        ctl.run()
    finally:
        if local is not None:
            local.stop()
    # what was announced goes out while this replica still leads (the fence drops it otherwise)
    if not notifier.drain(10.0):
        print(f"lwsflow controller {identity}: notifications still queued after 10s; not sent",
              file=sys.stderr, flush=True)
    if leader is not None:
        leader.stop(release=True)
    return 0


def _local_prometheus(kube: Kube, namespace: str | None) -> Prometheus:
    """A Prometheus on 127.0.0.1 scraping the serving pods of the watched namespace(s)."""
    from lwsflow.components.prometheus import start_prometheus
    from lwsflow.controller.kube.resources import POD

    prom = start_prometheus()
    prom.follow(lambda: kube.list(POD, namespace)[0])
    print(f"lwsflow controller: analysis Prometheus {prom.url}", flush=True)
    return prom


def _analysis(kube: Kube, kubeconfig: str | None, prometheus_url: str | None,
              local: Prometheus | None) -> AnalysisFactory:
    """The policies' analysis hook: `lwsflow rollout --analysis`'s, with the smoke provider."""
    from lwsflow.components.analysis_hook import analysis_hook
    from lwsflow.components.analysis_smoke import smoke_measure

    def factory(spec: Any, on_measurement: Any) -> Hook:
        return analysis_hook(spec, kube, prometheus_url, local, smoke=smoke_measure(kubeconfig),
                             on_measurement=on_measurement)
    return factory


def _pd_probe() -> CompatProbe:
    """The policies' cross-revision P/D probe (``pdProbe``): `lwsflow rollout --pd-probe`'s, from
    components (controller/ must not import components). No connection of its own: the controller
    hands it its own, fenced on leadership, for every probe (``Controller._fenced_probe``)."""
    from lwsflow.components.pd_probe import pd_probe

    return pd_probe()


def _smoke(kubeconfig: str | None) -> SmokeFactory:
    """The smoke-check factory (components' smoke test; controller/ must not import components)."""
    def factory(check: SmokeCheck) -> Hook:
        from lwsflow.components.smoke.model import SmokeConfig
        from lwsflow.components.smoke.report import failure_summary, pass_summary
        from lwsflow.components.smoke.runner import run_smoke
        from lwsflow.controller.rollout.hooks import HookContext, HookResult

        def smoke(ctx: HookContext) -> HookResult:
            # a pair policy's context is its pair (driver._of_pair), a blue-green stage's green's pair
            # (ctx.name): both roles and the P/D hand-off, as `lwsflow rollout pair/NAME --smoke`
            kind = {"LeaderWorkerSet": "lws", "DisaggregatedSet": "ds", "LeaderWorkerSetPair": "pair"}.get(
                ctx.kind, "lws")
            rep = run_smoke(SmokeConfig(targets=[f"{kind}/{ctx.name}"], namespace=ctx.namespace,
                                        kubeconfig=kubeconfig, revision_only=True))
            return HookResult(rep.passed, pass_summary(rep) if rep.passed else failure_summary(rep))
        smoke.__name__ = "smoke"
        return smoke
    return factory
