"""Deterministic "model": a whitespace tokenizer and hash-derived output words.

The stand-in engine's tokenizer is **whitespace words**: ``len(text.split())`` tokens. Generated text is
a sequence of words from a fixed vocabulary chosen by SHA-256 of the prompt and the position, each
emitted as ``" " + word`` (one token per word), so usage counts can be checked against the text and the
same prompt always yields the same output (temperature is ignored).
"""

from __future__ import annotations

import hashlib

VOCAB = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
    "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor",
    "whiskey", "xray", "yankee", "zulu", "leader", "worker", "prefill", "decode", "token", "cache", "block",
)


def count_tokens(text: str) -> int:
    """Tokens in ``text`` under the stand-in tokenizer (whitespace-separated words)."""
    return len(text.split())


def chat_prompt(messages: list[dict]) -> str:
    """Render chat messages the way the stand-in's "chat template" does: ``role: content`` lines."""
    lines = []
    for m in messages:
        content = m.get("content", "")
        if isinstance(content, list):  # OpenAI content parts: keep the text parts
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        lines.append(f"{m.get('role', 'user')}: {content}")
    return "\n".join(lines)


def natural_length(prompt: str) -> int:
    """How many tokens the model "wants" to say before stopping (4..15), from the prompt hash."""
    return 4 + hashlib.sha256(prompt.encode()).digest()[0] % 12


def generate(prompt: str, max_tokens: int) -> tuple[list[str], str]:
    """Output tokens (each ``" word"``) and the finish_reason (``stop`` or ``length``)."""
    want = natural_length(prompt)
    n = min(want, max(max_tokens, 0))
    seed = hashlib.sha256(prompt.encode()).digest()
    words = []
    for i in range(n):
        h = hashlib.sha256(seed + i.to_bytes(4, "big")).digest()
        words.append(" " + VOCAB[int.from_bytes(h[:4], "big") % len(VOCAB)])
    return words, ("stop" if want <= max_tokens else "length")
