"""What is wrong with a RolloutPolicy's spec, in the user's words: the controller's ``status.message``
for a policy the API server admitted but the model refuses (one stored before the CRD's rules, or an
analysis condition whose grammar only the controller checks).

pydantic says ``stages.1.groups: Value error, ...``: a path counted from 0 and its own prefix. A user
counts stages from 1 and names a metric by its name: ``stage 2: groups must be ...``,
``analysis metric error-rate: successCondition 'result >': syntax error at column 9: ...``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.policy.model import RolloutPolicySpec

# list fields whose items a user counts (from 1), and the word for one item
_ITEMS = {"stages": "stage", "checks": "check", "webhooks": "webhook", "metrics": "analysis metric"}
_PREFIXES = ("Value error, ", "Assertion failed, ")


def _where(loc: tuple[int | str, ...], spec: Any) -> tuple[list[str], list[str]]:
    """(the items the problem is in, as the user counts them; the field path below the last one)."""
    items: list[str] = []
    fields: list[str] = []
    node = spec
    i = 0
    while i < len(loc):
        part = loc[i]
        node = node.get(part) if isinstance(node, dict) and isinstance(part, str) else None
        index = loc[i + 1] if i + 1 < len(loc) else None
        if isinstance(part, str) and part in _ITEMS and isinstance(index, int):
            node = node[index] if isinstance(node, list) and index < len(node) else None
            name = node.get("name") if part == "metrics" and isinstance(node, dict) else None
            items.append(f"{_ITEMS[part]} {name}" if isinstance(name, str) and name
                         else f"{_ITEMS[part]} {index + 1}")
            fields = []  # "analysis metric x", not "analysis, analysis metric x"
            i += 2
            continue
        fields.append(f"[{part + 1}]" if isinstance(part, int) else str(part))
        i += 1
    return items, fields


def describe(exc: ValidationError, spec: Any) -> str:
    """The first problem of ``exc`` (from validating ``spec``) as one line in the user's words."""
    err = exc.errors()[0]
    msg = str(err["msg"])
    for prefix in _PREFIXES:
        msg = msg.removeprefix(prefix)
    if err["type"] not in ("value_error", "assertion_error", "missing", "extra_forbidden") \
            and not isinstance(err.get("input"), dict | list | None):
        msg = f"{msg} (got {err['input']!r})"  # pydantic's own words do not say what they refused
    items, fields = _where(tuple(err["loc"]), spec)
    field = ".".join(fields).replace(".[", "[")
    if field and not msg.startswith(fields[-1] + " "):  # "groups must be ..." names its field already
        msg = f"{field}: {msg}"
    return f"{', '.join(items)}: {msg}" if items else msg


def stored_spec(policy: Any) -> RolloutPolicySpec:
    """The model of a stored policy's spec, or ``InvalidInput`` naming the policy and its first problem
    in the user's words (what ``kubectl lwsflow`` and the dashboard say about an invalid policy)."""
    raw = policy.get("spec") or {}
    try:
        return RolloutPolicySpec.model_validate(raw)
    except ValidationError as exc:
        meta = policy.get("metadata") or {}
        where = f"rolloutpolicy {meta.get('namespace', '?')}/{meta.get('name', '?')}"
        raise InvalidInput(describe(exc, raw), source=where) from None
