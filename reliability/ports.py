"""A serving port for a test cluster's stand-in engines, from the kernel and held for the test.

Every leader pod of a workload serves on one port (its template's annotation, an InferencePool's
targetPort), each at its own pod IP. A port drawn at random may be taken already, and one the kernel
hands out (bind to port 0) is free only until someone else takes it. So the port is reserved: a socket
bound to it on every address with SO_REUSEADDR and never listening. The kernel then gives that port to
no other bind to port 0 and to no outgoing connection, and refuses it to any other bind, while the
engines, which set SO_REUSEADDR as ``http.server`` does, may still bind it at their pod IPs.
"""

from __future__ import annotations

import socket


class ReservedPort:
    """``port``, reserved until ``close()`` (or the end of a ``with`` block)."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("0.0.0.0", 0))
        self.port: int = self._sock.getsockname()[1]

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> ReservedPort:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
