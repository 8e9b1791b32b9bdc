"""Transport failures of the official client as one actionable line (issue 13.5): which URL, what
happened, which kubeconfig; an ``Unreachable`` (retried like a 5xx), never ``500 InternalError``."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import urllib3

from lwsflow.controller.errors import ServerError, Unreachable
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.kube.unreachable import what_happened
from lwsflow.sim.kubeconfig import write_kubeconfig


def test_a_listener_that_never_answers_is_a_timeout(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)  # the kernel completes the handshake; nobody ever reads or answers
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        kc = write_kubeconfig(tmp_path / "kc", url, None)
        kube = Kube.connect(str(kc), attempts=2, base_delay=0.01)
        with pytest.raises(Unreachable) as exc:
            kube.request("GET", LWS.path("default", "x"), timeout=0.3)
    assert str(exc.value) == (f"cannot reach the Kubernetes API at {url} (no answer within the request "
                              f"timeout; kubeconfig: {kc})")
    assert isinstance(exc.value, ServerError) and kube.retries == 1  # retried like a 5xx


@pytest.mark.parametrize(("exc", "phrase"), [
    (urllib3.exceptions.NameResolutionError("nohost", None, socket.gaierror("x")),  # type: ignore[arg-type]
     "the host name does not resolve"),
    (urllib3.exceptions.NewConnectionError(None, "refused"), "nothing answered"),  # type: ignore[arg-type]
    (urllib3.exceptions.ConnectTimeoutError("slow"), "no answer within the request timeout"),
    (urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError()),
     "the connection closed without an answer"),
    ("SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate "
     "(_ssl.c:1006)", "TLS handshake failed: certificate verify failed: self-signed certificate"),
])
def test_each_transport_failure_says_what_happened(exc: BaseException | str, phrase: str) -> None:
    assert what_happened(exc) == phrase
