"""Transport failures (nothing answered, timeouts, TLS) as one actionable line.

The official client reports them as urllib3/OSError exceptions, or, for TLS, as an ``ApiException``
with status 0 whose reason is the SSLError text. Either way the user needs the URL, what went wrong
and which kubeconfig named that URL, not ``500 InternalError: NewConnectionError``.
"""

from __future__ import annotations

import re

import urllib3

from lwsflow.controller.errors import Unreachable

_SSL_REASON = re.compile(r"\[SSL(?:: \w+)?\] ([^(\n]+)")


def what_happened(exc: BaseException | str) -> str:
    """A short phrase for a transport failure: ``nothing answered``, ``TLS handshake failed: ...``."""
    text = str(exc)
    if isinstance(exc, urllib3.exceptions.SSLError) or "SSLError" in text or "[SSL" in text:
        m = _SSL_REASON.search(text)
        return f"TLS handshake failed: {(m.group(1) if m else text.splitlines()[-1]).strip()}"
    if isinstance(exc, urllib3.exceptions.NameResolutionError):
        return "the host name does not resolve"
    if isinstance(exc, (urllib3.exceptions.NewConnectionError, ConnectionRefusedError)):
        return "nothing answered"
    if isinstance(exc, (urllib3.exceptions.TimeoutError, TimeoutError)):
        return "no answer within the request timeout"
    if isinstance(exc, (urllib3.exceptions.ProtocolError, ConnectionError)):
        return "the connection closed without an answer"
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def unreachable(url: str, source: str, exc: BaseException | str) -> Unreachable:
    """The error for a request to ``url`` (from the kubeconfig ``source``) that got no API answer."""
    return Unreachable(f"cannot reach the Kubernetes API at {url} ({what_happened(exc)}; {source})")
