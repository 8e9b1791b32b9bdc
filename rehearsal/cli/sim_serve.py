"""`lwsflow sim serve`: the embedded cluster behind a Kubernetes API on 127.0.0.1, for kubectl and clients."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lwsflow.rehearsal.cli.sim import sim_app


@sim_app.command("serve")
def serve(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Cluster config YAML (default: a CPU pool plus the example catalog's GPU pools, "
            "16 nodes x 8 H100-80GB and 8 nodes x 4 L40S).",
        ),
    ] = None,
    catalog: Annotated[
        Path | None,
        typer.Option(
            "--catalog",
            help="Build the cluster from a catalog's nodePools (labels, GPU product, taints, topology, "
            "CPU/memory), so its rendered pods schedule; instead of --config.",
        ),
    ] = None,
    port: Annotated[int, typer.Option("--port", help="TCP port on 127.0.0.1 (0: any free port).")] = 0,
    speed: Annotated[
        float | None,
        typer.Option(
            "--speed", help="Virtual seconds per wall second (default: a 10-minute model load takes ~1 s)."
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", show_default=False,
                     help="Where to write the kubeconfig (mode 0600: it holds the token). Default: "
                     ".lwsflow/sim.kubeconfig in the project root (the nearest folder up with .git), "
                     "else in the current folder."),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option("--duration", help="Stop after this many wall seconds (default: until interrupted)."),
    ] = None,
    engines: Annotated[
        bool,
        typer.Option("--engines/--no-engines",
                     help="Leader pods serve the stand-in OpenAI engine on their pod IP (127.N.x.y), so "
                     "`lwsflow smoke` can test them."),
    ] = True,
    router: Annotated[
        bool,
        typer.Option("--router/--no-router",
                     help="Also start the stand-in llm-d router (proxy + endpoint picker + decode sidecars) "
                     "for the cluster's InferencePools on 127.0.0.1, and print its URL (docs/llm-d.md)."),
    ] = False,
    router_port: Annotated[
        int,
        typer.Option("--router-port", help="The router's port on 127.0.0.1 (0: a free one; the URL is "
                     "printed either way)."),
    ] = 0,
    pd_threshold: Annotated[
        int,
        typer.Option("--pd-threshold", help="The router's P/D decider: disaggregate when the prompt's "
                     "estimated uncached tokens (characters / 4) reach this (0: never)."),
    ] = 16,
) -> None:
    """Serve the embedded cluster over HTTPS with a bearer token, and write a kubeconfig for it."""
    import contextlib
    import signal
    import threading
    import time

    from lwsflow.controller.errors import InvalidInput
    from lwsflow.sim.cluster import DEFAULT_SPEED
    from lwsflow.sim.config import ClusterConfig
    from lwsflow.sim.testing import EmbeddedCluster

    if not 0 <= port <= 65535:
        raise InvalidInput(f"must be between 0 and 65535, got {port}", field="--port")
    speed = DEFAULT_SPEED if speed is None else speed
    if not speed > 0:
        raise InvalidInput(f"must be greater than 0, got {speed:g}", field="--speed")
    if duration is not None and duration < 0:
        raise InvalidInput(f"must be >= 0, got {duration:g}", field="--duration")
    if pd_threshold < 0:
        raise InvalidInput(f"must be >= 0, got {pd_threshold}", field="--pd-threshold")
    if not 0 <= router_port <= 65535:
        raise InvalidInput(f"must be between 0 and 65535, got {router_port}", field="--router-port")
    if router_port and not router:
        raise InvalidInput("is for the router: add --router", field="--router-port")
    if router and not engines:
        raise InvalidInput("the router needs the stand-in engines: drop --no-engines", field="--router")
    if config is not None and catalog is not None:
        raise InvalidInput("give --config or --catalog, not both", field="--catalog")
    if catalog is not None:
        from lwsflow.components.catalog import load_catalog
        from lwsflow.rehearsal.catalog_cluster import cluster_config_for

        cfg = cluster_config_for(load_catalog(catalog))
    else:
        cfg = ClusterConfig.from_file(config) if config is not None else ClusterConfig.default()
    # Virtual time starts at wall time: kubectl computes ages client-side against the wall clock, so
    # they start right (they then drift by --speed; see docs/embedded-cluster.md). The token is only
    # ever written to the 0600 kubeconfig, never printed.
    kubeconfig = kubeconfig or default_kubeconfig()
    sim = EmbeddedCluster(kubeconfig.parent, cfg, speed=speed, engines=engines, port=port,
                          now0=time.time(), kubeconfig_name=kubeconfig.name)
    try:
        url = sim.start().url
    except OSError as exc:
        if sim.url:  # it was listening: the kubeconfig could not be written
            raise InvalidInput(f"cannot write {kubeconfig}: {exc.strerror}", field="--kubeconfig") from None
        raise InvalidInput(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}", field="--port") from None
    proxy = None
    if router:
        from lwsflow.sim.router import start_router

        try:
            proxy = start_router(sim.store, non_cached_tokens=pd_threshold, port=router_port,
                                 on_route=lambda r: print(r.line(), flush=True))
        except OSError as exc:
            sim.close()
            sim.kubeconfig.unlink(missing_ok=True)  # nothing half-written: the cluster never served
            raise InvalidInput(f"cannot listen on 127.0.0.1:{router_port}: {exc.strerror}",
                               field="--router-port") from None
    done = threading.Event()
    previous = (
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        if threading.current_thread() is threading.main_thread()
        else None
    )
    try:
        path = sim.kubeconfig
        print(f"serving {url} (virtual time x{speed:g}); kubeconfig: {path}", flush=True)
        print(f"  kubectl --kubeconfig {path} get nodes", flush=True)
        if proxy is not None:
            print(f"router {proxy.url} (InferencePools in the cluster); "
                  f"lwsflow smoke --gateway-url {proxy.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way to stop
            done.wait(duration)
    finally:
        if proxy is not None:
            proxy.close()
        sim.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def default_kubeconfig(cwd: Path | None = None) -> Path:
    """``.lwsflow/sim.kubeconfig`` under the project root (nearest ancestor with ``.git``), else under
    ``cwd``: the state folder .gitignore covers, so the token never lands in a tracked folder."""
    here = (cwd or Path.cwd()).resolve()
    root = next((d for d in (here, *here.parents) if (d / ".git").exists()), here)
    return root / ".lwsflow" / "sim.kubeconfig"

