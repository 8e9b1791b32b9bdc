"""Where measurements come from: a Prometheus instant query, the smoke test, an HTTP JSON value, or a
command's output. The smoke test is a component (``controller`` must not import ``components``), so
its provider is a callable the caller wires in (``SmokeMeasure``; ``components/analysis_smoke.py``).

Each returns one number or ``None`` (no data yet); ``ProviderError`` carries a one-line reason that
makes the measurement inconclusive rather than crashing the analysis.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable

import httpx

from lwsflow.controller import httpclient
from lwsflow.controller.analysis.spec import CommandProvider, HttpProvider, SmokeProvider, render
from lwsflow.controller.analysis.stats import Buckets

_TIMEOUT_S = 10.0

SmokeMeasure = Callable[[SmokeProvider, dict[str, str]], "float | None"]
"""(provider, args) -> the smoke value for ``args['namespace']``/``args['lws']``; raises ProviderError."""


class ProviderError(Exception):
    pass


def _number(v: object, what: str) -> float:
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ProviderError(f"{what}: {str(v)[:80]!r} is not a number") from None


def _query(address: str, query: str, timeout: float) -> tuple[object, object]:
    """(resultType, result) of an instant query; ProviderError with the reason otherwise."""
    try:
        resp = httpclient.shared().get(f"{address.rstrip('/')}/api/v1/query", params={"query": query},
                                       timeout=timeout)
    except httpx.HTTPError as exc:
        raise ProviderError(f"prometheus {address}: {type(exc).__name__}") from None
    try:
        doc = resp.json()
    except ValueError:
        raise ProviderError(f"prometheus answered HTTP {resp.status_code} without JSON") from None
    if doc.get("status") != "success":
        raise ProviderError(f"prometheus: {doc.get('errorType', '')} {doc.get('error', '')}".strip()[:300])
    data = doc.get("data") or {}
    return data.get("resultType"), data.get("result")


def prometheus_value(address: str, query: str, timeout: float = _TIMEOUT_S) -> float | None:
    """An instant query that must yield one number (a scalar or a one-series vector); None: no series
    or NaN (e.g. a rate over a window without samples)."""
    rtype, result = _query(address, query, timeout)
    if rtype == "scalar" and isinstance(result, list) and len(result) == 2:
        value = _number(result[1], "prometheus")
    elif rtype == "vector" and isinstance(result, list):
        if not result:
            return None
        if len(result) > 1:
            raise ProviderError(f"query returned {len(result)} series; aggregate it to one (sum, max ...)")
        value = _number(result[0]["value"][1], "prometheus")
    else:
        raise ProviderError(f"query returned a {rtype}; an instant vector or scalar is needed")
    return None if math.isnan(value) else value


def prometheus_buckets(address: str, query: str, timeout: float = _TIMEOUT_S) -> Buckets | None:
    """An instant query that yields one series per ``le`` (``sum by (le) (increase(x_bucket[...]))``);
    None: no series, or no requests at all."""
    rtype, result = _query(address, query, timeout)
    if rtype != "vector" or not isinstance(result, list):
        raise ProviderError(f"query returned a {rtype}; histogram mode needs a vector by le")
    by_le: dict[float, float] = {}
    for series in result:
        le = (series.get("metric") or {}).get("le")
        if le is None:
            raise ProviderError("histogram mode needs one series per le: aggregate with sum by (le)")
        le_s = _number(le, "le")
        if le_s in by_le:
            raise ProviderError(f"two series for le={le}: aggregate with sum by (le)")
        count = _number(series["value"][1], "prometheus")
        by_le[le_s] = 0.0 if math.isnan(count) else count
    if not by_le:
        return None
    if math.inf not in by_le:
        raise ProviderError("the histogram has no le=\"+Inf\" bucket")
    buckets = Buckets.of(by_le)
    return buckets if buckets.total > 0 else None


def http_value(p: HttpProvider, args: dict[str, str]) -> float | None:
    url = render(p.url, args)
    try:
        resp = httpclient.shared().get(url, timeout=p.timeout)
    except httpx.HTTPError as exc:
        raise ProviderError(f"{url}: {type(exc).__name__}") from None
    if not resp.is_success:
        raise ProviderError(f"{url}: HTTP {resp.status_code}")
    if not p.json_path:
        return _number(resp.text.strip(), url)
    try:
        node: object = resp.json()
    except ValueError:
        raise ProviderError(f"{url}: answer is not JSON") from None
    for part in p.json_path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ProviderError(f"{url}: no {p.json_path!r} in the answer")
    return None if node is None else _number(node, url)


def command_value(p: CommandProvider, args: dict[str, str]) -> float | None:
    argv = [render(a, args) for a in p.argv]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=p.timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ProviderError(f"{argv[0]}: timed out after {p.timeout:g}s") from None
    except OSError as exc:
        raise ProviderError(f"{argv[0]}: {exc.strerror}") from None
    if proc.returncode != 0:
        raise ProviderError(f"{argv[0]}: exit {proc.returncode}")
    lines = proc.stdout.strip().splitlines()
    return _number(lines[-1], argv[0]) if lines else None
