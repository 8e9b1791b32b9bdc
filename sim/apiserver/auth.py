"""Bearer-token authentication: the kubeconfig's admin token, or a ServiceAccount token minted by the
TokenRequest subresource (``POST .../serviceaccounts/NAME/token``); anything else is 401.

ServiceAccount tokens are opaque random strings (a real cluster issues signed JWTs; clients never
look inside). Like a bound token, one stops working when it expires (cluster clock) or when its
ServiceAccount is deleted or recreated (the UID changes).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass

from lwsflow.controller.errors import Unauthorized
from lwsflow.sim import kinds
from lwsflow.sim.apiserver.rbac import User
from lwsflow.sim.store import Store


@dataclass(frozen=True)
class _Bound:
    namespace: str
    name: str
    uid: str
    expires: float


class Authenticator:
    """Maps a request's ``Authorization`` header to a User (see the module doc)."""

    def __init__(self, store: Store, admin_token: str | None) -> None:
        self.store, self.admin_token = store, admin_token
        self._tokens: dict[bytes, _Bound] = {}  # sha256 of the token -> what it is bound to
        self._lock = threading.Lock()
        self._admin = User.admin()

    def authenticate(self, header: str | None, now: float) -> User:
        """The user behind ``header``; no admin token configured: everyone is the admin."""
        if self.admin_token is None:
            return self._admin
        scheme, _, given = (header or "").partition(" ")
        given = given.strip()
        if scheme.lower() == "bearer" and given:
            # constant-time comparison: the token is the only thing guarding the cluster
            if hmac.compare_digest(given.encode(), self.admin_token.encode()):
                return self._admin
            with self._lock:
                bound = self._tokens.get(hashlib.sha256(given.encode()).digest())
            if bound is not None and bound.expires > now:
                sa = self.store.get_raw(kinds.SERVICE_ACCOUNT.key, bound.namespace, bound.name)
                if sa is not None and sa["metadata"].get("uid") == bound.uid:
                    return User.service_account(bound.namespace, bound.name)
        raise Unauthorized("Unauthorized")

    def mint(self, sa: dict, expires: float) -> str:
        """A new token for the ServiceAccount object ``sa``, valid until ``expires`` (cluster time)."""
        token = secrets.token_urlsafe(32)
        meta = sa["metadata"]
        with self._lock:
            self._tokens[hashlib.sha256(token.encode()).digest()] = _Bound(
                meta.get("namespace", ""), meta["name"], meta.get("uid", ""), expires
            )
        return token
