"""Response shapes of OpenAI-compatible servers (vLLM 0.33, SGLang), as problems found in a body.

Each ``*_problems`` function returns a list of human-readable problems (empty = valid), so a failed
check can say what was expected and what came back. Usage consistency is checked without knowing the
tokenizer: totals add up, the completion respects ``max_tokens``, and ``finish_reason == "length"``
means exactly ``max_tokens`` tokens were generated.
"""

from __future__ import annotations

from typing import Any

FINISH_REASONS = ("stop", "length", "abort", "error", "repetition", "tool_calls")


def _usage_problems(usage: Any, max_tokens: int, finish: Any, min_completion: int) -> list[str]:
    if not isinstance(usage, dict):
        return [f"usage missing (got {usage!r})"]
    p, c, t = usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("total_tokens")
    if not (isinstance(p, int) and isinstance(c, int) and isinstance(t, int)):
        return [f"usage counts not integers: {usage}"]
    problems = []
    if p < 1:
        problems.append(f"usage.prompt_tokens={p}, expected >= 1")
    if t != p + c:
        problems.append(f"usage.total_tokens={t} != prompt_tokens {p} + completion_tokens {c}")
    if c > max_tokens:
        problems.append(f"usage.completion_tokens={c} > max_tokens {max_tokens}")
    if c < min_completion:
        problems.append(f"usage.completion_tokens={c} but {min_completion} content pieces came back")
    if finish == "length" and c != max_tokens:
        problems.append(f"finish_reason=length but completion_tokens={c} != max_tokens {max_tokens}")
    return problems


def completion_problems(body: Any, model: str, chat: bool, max_tokens: int) -> list[str]:
    """Problems with a non-streaming ``/v1/completions`` or ``/v1/chat/completions`` body."""
    if not isinstance(body, dict):
        return [f"body is not an object: {str(body)[:80]}"]
    problems = []
    obj = "chat.completion" if chat else "text_completion"  # ids: vLLM "cmpl-…", SGLang plain hex
    if not isinstance(body.get("id"), str) or not body["id"]:
        problems.append("id missing")
    if body.get("object") != obj:
        problems.append(f"object={body.get('object')!r}, expected {obj!r}")
    if body.get("model") != model:
        problems.append(f"model={body.get('model')!r}, expected {model!r}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return [*problems, f"choices missing or empty: {choices!r}"]
    ch = choices[0]
    text = (ch.get("message") or {}).get("content") if chat else ch.get("text")
    if chat and (ch.get("message") or {}).get("role") != "assistant":
        problems.append(f"message.role={(ch.get('message') or {}).get('role')!r}, expected 'assistant'")
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{'message.content' if chat else 'text'} is empty: {text!r}")
    finish = ch.get("finish_reason")
    if finish not in ("stop", "length"):
        problems.append(f"finish_reason={finish!r}, expected 'stop' or 'length'")
    problems += _usage_problems(body.get("usage"), max_tokens, finish, 1 if text else 0)
    return problems


def stream_problems(events: list[dict], pieces: list[str], done: bool, model: str, chat: bool,
                    max_tokens: int) -> list[str]:
    """Problems with the events of an SSE stream sent with ``stream_options.include_usage``."""
    problems = []
    if not done:
        problems.append("stream ended without data: [DONE]")
    if not pieces:
        problems.append("no content in the stream")
    obj = "chat.completion.chunk" if chat else "text_completion"
    ids = {e.get("id") for e in events if isinstance(e, dict)}
    if len(ids) != 1 or None in ids:
        problems.append(f"chunk ids not one stable id: {sorted(map(str, ids))[:3]}")
    bad_obj = {e.get("object") for e in events} - {obj}
    if bad_obj:
        problems.append(f"chunk object {sorted(map(str, bad_obj))}, expected {obj!r}")
    if any(e.get("model") != model for e in events):
        problems.append(f"a chunk names another model than {model!r}")
    finishes = [c.get("finish_reason") for e in events for c in (e.get("choices") or [])
                if isinstance(c, dict) and c.get("finish_reason")]
    if len(finishes) != 1 or finishes[0] not in ("stop", "length"):
        problems.append(f"finish_reason across chunks {finishes}, expected one 'stop' or 'length'")
    usage_chunks = [e for e in events if e.get("usage")]
    if not usage_chunks:
        problems.append("no usage chunk although stream_options.include_usage was set")
    else:
        last = usage_chunks[-1]
        if last.get("choices"):
            problems.append("the usage chunk should have empty choices")
        problems += _usage_problems(last["usage"], max_tokens, finishes[0] if finishes else None,
                                    len(pieces))
    return problems


def error_form(body: Any) -> tuple[str, str] | None:
    """Recognise an OpenAI-style error body: ('vllm', message) for the nested form
    ``{"error": {"message", "type", "code"}}``, ('sglang', message) for the flat
    ``{"object": "error", "message", "type", "code"}``; None if it is neither."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str) and "type" in err:
            return "vllm", err["message"]
        if body.get("object") == "error" and isinstance(body.get("message"), str) and "type" in body:
            return "sglang", body["message"]
    return None
