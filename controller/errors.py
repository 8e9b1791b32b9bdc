"""One exception family for lwsflow.

    LwsflowError                      base of everything lwsflow raises on purpose
    ├── InvalidInput                  the user's input is wrong; the CLI prints one line, exit code 2
    │   └── ValidationFailed          several field problems collected at once (list of FieldError)
    ├── OperationFailed               a step ran and failed (rollout rolled back, smoke check failed); exit 1
    └── ApiError                      a Kubernetes API answer; one class per status, raised alike by the
        ├── BadRequest (400)          real client wrapper and the embedded cluster
        ├── Unauthorized (401)
        ├── Forbidden (403)
        ├── NotFound (404)
        ├── Conflict (409)            resourceVersion mismatch on a write
        │   └── AlreadyExists (409)
        ├── Gone (410)                watch resourceVersion too old: relist
        ├── Unprocessable (422)       object invalid (schema or webhook rules)
        ├── TooManyRequests (429)
        ├── Fenced                    a write refused on our side, never sent: this replica cannot prove
        │                             it still leads (or its rollout was stopped)
        └── ServerError (5xx)
            └── Unreachable           no API answered at all (refused, timed out, TLS failed): retried
                                      like a 5xx, but printed as what happened, not as an API status
"""

from __future__ import annotations

from dataclasses import dataclass

from lwsflow.controller.api.wire import Obj


class LwsflowError(Exception):
    """Base of every error lwsflow raises on purpose."""


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path, e.g. ``spec.leaderWorkerTemplate.size: must be >= 1``."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InvalidInput(LwsflowError):
    """Bad user input. ``field`` names where (dotted path); the CLI maps this to exit code 2."""

    def __init__(self, message: str, field: str = "", source: str = "") -> None:
        self.field = field
        self.source = source
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = ": ".join(p for p in (self.source, self.field) if p)
        return f"{where}: {self.message}" if where else self.message


class ValidationFailed(InvalidInput):
    """Several field problems found together (like Kubernetes' field.ErrorList)."""

    def __init__(self, errors: list[FieldError], source: str = "") -> None:
        self.errors = list(errors)
        first = self.errors[0] if self.errors else FieldError("", "invalid")
        more = f" (and {len(self.errors) - 1} more)" if len(self.errors) > 1 else ""
        super().__init__(first.message + more, field=first.path, source=source)


class OperationFailed(LwsflowError):
    """A step ran and did not succeed (exit code 1)."""


class ApiError(LwsflowError):
    """A Kubernetes API error status. ``status`` is the HTTP code, ``reason`` the Status reason."""

    status: int = 500
    reason: str = "InternalError"

    def __init__(self, message: str = "", *, retry_after: float | None = None,
                 details: Obj | None = None) -> None:
        self.message = message or self.reason
        self.retry_after = retry_after
        self.details = details or {}
        super().__init__(f"{self.status} {self.reason}: {self.message}")

    def to_status(self) -> Obj:
        """The ``metav1.Status`` body the API server sends for this error."""
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.status}
        if self.details:
            body["details"] = self.details
        return body


class BadRequest(ApiError):
    status, reason = 400, "BadRequest"


class Unauthorized(ApiError):
    status, reason = 401, "Unauthorized"


class Forbidden(ApiError):
    status, reason = 403, "Forbidden"


class NotFound(ApiError):
    status, reason = 404, "NotFound"


class MethodNotAllowed(ApiError):
    status, reason = 405, "MethodNotAllowed"


class Conflict(ApiError):
    status, reason = 409, "Conflict"


class AlreadyExists(Conflict):
    status, reason = 409, "AlreadyExists"


class Gone(ApiError):
    status, reason = 410, "Expired"


class Unprocessable(ApiError):
    status, reason = 422, "Invalid"


class Fenced(ApiError):
    """A write this process refused to send: its leadership is unproven (the Lease was not renewed
    within the renew deadline) or the rollout it belongs to was stopped (its policy deleted)."""

    status, reason = 0, "Fenced"


class TooManyRequests(ApiError):
    status, reason = 429, "TooManyRequests"


class ServerError(ApiError):
    status, reason = 500, "InternalError"


class ServiceUnavailable(ServerError):
    status, reason = 503, "ServiceUnavailable"


class Unreachable(ServerError):
    """Nothing answered at the API server's address (or it did not speak TLS/HTTP). Not an answer of
    the API, so its text is the plain message: which URL, what happened, which kubeconfig."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.args = (message,)

    def __str__(self) -> str:
        return self.message


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
    409: Conflict, 410: Gone, 422: Unprocessable, 429: TooManyRequests, 500: ServerError,
    503: ServiceUnavailable,
}


def api_error_for(status: int, message: str = "", reason: str = "", **kw: object) -> ApiError:
    """Map an HTTP status (and Status reason) to the matching ApiError instance."""
    if status == 409 and reason == "AlreadyExists":
        return AlreadyExists(message, **kw)  # type: ignore[arg-type]
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    err = cls(message, **kw)  # type: ignore[arg-type]
    err.status = status
    return err
