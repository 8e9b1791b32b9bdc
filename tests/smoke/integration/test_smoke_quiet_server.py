"""A client that resets the connection mid-request is routine for a server: no traceback on stderr."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from lwsflow.sim.engine import start_engine


def test_client_reset_mid_request_leaves_stderr_clean(capfd: pytest.CaptureFixture[str]) -> None:
    with start_engine(model="m") as eng:
        host, port = eng.url.removeprefix("http://").split(":")
        for _ in range(3):
            s = socket.create_connection((host, int(port)), timeout=2)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
            s.close()
        time.sleep(0.3)
        import httpx

        assert httpx.get(eng.url + "/health", timeout=5).status_code == 200
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err
