"""The P/D KV hand-off of the stand-in engine, shaped like vLLM's NIXL connector.

A prefill engine keeps the "KV blocks" of each ``do_remote_decode`` request for a lease
(``kv_lease_s``, vLLM's ``kv_lease_duration`` default 30 s) and serves them on a side channel: a small
HTTP server on its own port (vLLM's NIXL side channel, ``VLLM_NIXL_SIDE_CHANNEL_PORT`` default 5600). A
decode engine given the returned ``kv_transfer_params`` really pulls the blocks from that side channel
over loopback, so a missing, dead or misbehaving prefiller is detected the way the real path would.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

import httpx

from lwsflow.controller import httpclient
from lwsflow.sim.httpserver import QuietThreadingHTTPServer, read_body, send_body

BLOCK_TOKENS = 16  # tokens per KV block, vLLM's default block_size
NIXL_CONNECTOR_VERSION = 2  # part of the compatibility hash, as vLLM's NIXL_CONNECTOR_VERSION
DEFAULT_KV_LAYOUT = "1"  # the stand-in engine's KV-cache layout version (an image profile may change it)
REQUIRED_PARAMS = ("remote_engine_id", "remote_block_ids", "remote_host", "remote_port", "remote_request_id")


class KVTransferError(Exception):
    """The decode side could not load the remote KV (vLLM: KV load failure)."""


def compatibility_hash(version: str, kv_layout: str) -> str:
    """What a NIXL handshake compares, like vLLM's ``compute_nixl_compatibility_hash``: the engine
    version, the connector version and the KV-cache layout (vLLM hashes the model geometry, dtype,
    attention backend and cache dtype; here one layout version stands for all of them)."""
    factors = json.dumps({"vllm_version": version, "nixl_connector_version": NIXL_CONNECTOR_VERSION,
                          "kv_layout": kv_layout}, sort_keys=True)
    return hashlib.sha256(factors.encode()).hexdigest()[:16]


def mismatch_message(local: str, remote: str) -> str:
    """vLLM's words when the handshake finds an incompatible peer (vllm PR #29503, NIXL base worker)."""
    return (f"NIXL compatibility hash mismatch. Local: {local}, Remote: {remote}. Prefill and decode "
            "instances have incompatible configurations. This may be due to: different vLLM versions, "
            "models, dtypes, KV cache layouts, attention backends, etc. Both instances must use identical "
            "configurations.")


@dataclass
class _Lease:
    engine_id: str
    block_ids: list[int]
    num_tokens: int
    prompt_hash: str
    expires_at: float


class KVStore:
    """Prefill-side registry of held KV blocks, keyed by the remote request id."""

    def __init__(self, engine_id: str, lease_s: float, on_expired: Callable[[], None]) -> None:
        self.engine_id = engine_id
        self.lease_s = lease_s
        self._on_expired = on_expired
        self._lock = threading.Lock()
        self._leases: dict[str, _Lease] = {}
        self._next_block = 1

    def hold(self, prompt: str, num_tokens: int) -> tuple[str, list[int], float]:
        """Hold blocks for a prompt; returns (request id, block ids, expiry as unix seconds)."""
        n_blocks = max(1, -(-num_tokens // BLOCK_TOKENS))
        with self._lock:
            self._expire_locked()
            blocks = list(range(self._next_block, self._next_block + n_blocks))
            self._next_block += n_blocks
            rid = f"cmpl-{uuid.uuid4().hex}"
            expiry = time.time() + self.lease_s
            self._leases[rid] = _Lease(self.engine_id, blocks, num_tokens, _digest(prompt), expiry)
        return rid, blocks, expiry

    def take(self, engine_id: str, request_id: str, block_ids: list[int]) -> _Lease:
        """Hand the blocks to a decoder and release them; KeyError/ValueError when they do not match."""
        with self._lock:
            self._expire_locked()
            if engine_id != self.engine_id:
                raise KeyError(f"engine id {engine_id!r} is not this engine ({self.engine_id})")
            lease = self._leases.get(request_id)
            if lease is None:
                raise KeyError(f"no KV held for request {request_id!r} (never prefilled, taken or expired)")
            if list(block_ids) != lease.block_ids:
                raise ValueError(f"block ids {block_ids} do not match the held blocks {lease.block_ids}")
            del self._leases[request_id]
            return lease

    def _expire_locked(self) -> None:
        now = time.time()
        for rid in [r for r, lease in self._leases.items() if lease.expires_at <= now]:
            del self._leases[rid]
            self._on_expired()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class SideChannel:
    """The prefill engine's side-channel server: ``POST /kv/pull`` hands out held blocks."""

    def __init__(self, store: KVStore, host: str, port: int, broken: Callable[[], bool],
                 compat_hash: str = "") -> None:
        channel = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                status, body = channel.pull(read_body(self))
                send_body(self, status, json.dumps(body).encode(), "application/json")

            def do_GET(self) -> None:  # the handshake: this engine's metadata (vLLM: GET_META_MSG)
                status, body = channel.handshake() if self.path.split("?", 1)[0] == "/kv/handshake" \
                    else (404, {"error": "not found"})
                send_body(self, status, json.dumps(body).encode(), "application/json")

        self.store = store
        self.compat_hash = compat_hash
        self._broken = broken
        self.httpd = QuietThreadingHTTPServer((host, port), Handler)
        self.host, self.port = host, self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"kv-side-{self.port}",
                                        daemon=True)
        self._thread.start()

    def handshake(self) -> tuple[int, dict]:
        if self._broken():
            return 503, {"error": "NIXL handshake failed: remote agent metadata unavailable"}
        return 200, {"engine_id": self.store.engine_id, "compatibility_hash": self.compat_hash}

    def pull(self, raw: bytes) -> tuple[int, dict]:
        if self._broken():
            return 503, {"error": "NIXL handshake failed: remote agent metadata unavailable"}
        try:
            req = json.loads(raw or b"{}")
            lease = self.store.take(str(req.get("engine_id")), str(req.get("request_id")),
                                    list(req.get("block_ids") or []))
        except (KeyError, ValueError) as exc:
            return 404, {"error": exc.args[0] if exc.args else str(exc)}
        return 200, {"engine_id": lease.engine_id, "block_ids": lease.block_ids,
                     "num_tokens": lease.num_tokens, "prompt_hash": lease.prompt_hash}

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


class Handshakes:
    """Decode side: the compatibility hash of each remote engine, fetched once per engine id (vLLM
    handshakes once per remote engine and keeps the connection)."""

    def __init__(self, local_hash: str) -> None:
        self.local_hash = local_hash
        self._lock = threading.Lock()
        self._remote: dict[str, str] = {}

    def check(self, params: dict, timeout_s: float) -> None:
        """Raise KVTransferError unless the remote engine's hash equals ours (checked before any pull)."""
        engine_id = str(params.get("remote_engine_id"))
        with self._lock:
            remote = self._remote.get(engine_id)
        if remote is None:
            url = f"http://{params['remote_host']}:{params['remote_port']}/kv/handshake"
            try:
                resp = httpclient.shared().get(url, timeout=timeout_s)
            except httpx.HTTPError as exc:
                raise KVTransferError(f"NIXL handshake with {url} failed: {type(exc).__name__}: "
                                      f"{exc}") from exc
            if resp.status_code != 200:
                raise KVTransferError(f"NIXL handshake with {url} answered {resp.status_code}: "
                                      f"{resp.text[:200]}")
            remote = str(resp.json().get("compatibility_hash", ""))
            with self._lock:
                self._remote[engine_id] = remote
        if remote != self.local_hash:
            raise KVTransferError(mismatch_message(self.local_hash, remote))


def pull_remote_kv(params: dict, prompt: str, timeout_s: float, handshakes: Handshakes | None = None) -> int:
    """Decode side: pull the KV described by ``kv_transfer_params``; returns the tokens loaded.
    With ``handshakes``, the remote engine's compatibility hash is checked first (vLLM's default
    ``enforce_handshake_compat``)."""
    missing = [k for k in REQUIRED_PARAMS if params.get(k) in (None, "", [])]
    if missing:
        raise KVTransferError(f"kv_transfer_params missing {', '.join(missing)}")
    if handshakes is not None:
        handshakes.check(params, timeout_s)
    url = f"http://{params['remote_host']}:{params['remote_port']}/kv/pull"
    body = {"engine_id": params["remote_engine_id"], "request_id": params["remote_request_id"],
            "block_ids": params["remote_block_ids"]}
    try:
        resp = httpclient.shared().post(url, json=body, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise KVTransferError(f"side channel {url} unreachable: {type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200:
        raise KVTransferError(f"side channel {url} answered {resp.status_code}: {resp.text[:200]}")
    got = resp.json()
    if got.get("prompt_hash") != _digest(prompt):
        raise KVTransferError("remote KV was computed for a different prompt")
    return int(got["num_tokens"])
