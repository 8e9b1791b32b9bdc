"""Read an engine's ``/metrics`` with the real Prometheus text parser and sum series by name/labels."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

# Families a vLLM server must expose for the gates to work (reference §3). The ITL histogram was
# renamed across releases, so either name satisfies it.
REQUIRED = (
    ("vllm:request_success",),
    ("vllm:prompt_tokens",),
    ("vllm:generation_tokens",),
    ("vllm:time_to_first_token_seconds",),
    ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    ("vllm:num_requests_running",),
)
EXTERNAL_KV = "vllm:prompt_tokens_by_source_total"
FAILED_TRANSFERS = ("vllm:nixl_num_failed_transfers_total", "vllm:mooncake_num_failed_transfers")
EXPIRED = "vllm:nixl_num_kv_expired_reqs_total"


class MetricsError(ValueError):
    """The body is not Prometheus text."""


@dataclass
class Scrape:
    """Parsed samples: (sample name, labels) -> value, plus the family names seen."""

    samples: list[tuple[str, dict[str, str], float]]
    families: set[str]

    def total(self, name: str, **labels: str) -> float | None:
        """Sum of the samples called ``name`` whose labels include ``labels``; None if none exist."""
        vals = [v for n, lbl, v in self.samples
                if n == name and all(lbl.get(k) == want for k, want in labels.items())]
        return sum(vals) if vals else None

    def missing(self) -> list[str]:
        return [" or ".join(alts) for alts in REQUIRED if not any(a in self.families for a in alts)]


def parse(text: str) -> Scrape:
    """Parse Prometheus exposition text; raises MetricsError on malformed input."""
    samples: list[tuple[str, dict[str, str], float]] = []
    families: set[str] = set()
    try:
        for fam in text_string_to_metric_families(text):
            families.add(fam.name)
            for s in fam.samples:
                samples.append((s.name, dict(s.labels), float(s.value)))
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsError(f"not Prometheus text: {exc}") from exc
    return Scrape(samples, families)
