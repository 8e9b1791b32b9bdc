"""Package the upstream InferencePool and HTTPRoute CRD schemas into ``controller/api/crds/``.

Usage: ``.venv/bin/python scripts/pack_crds.py [--check]``. Reads the CRDs of the pinned Gateway API
and Inference Extension modules from the upstream cache (``lwsflow.controller.api.paths``; fetched
on first use); ``--check`` exits 1 when a packaged file differs from a fresh extraction instead of
writing. The LWS/DS copies are the product's own (see ``lwsflow.controller.api.crd``), not packed here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lwsflow.components.atomic import write_file_atomic
from lwsflow.controller.api.crd import PACKAGE_DIR, encode_packed, extract_crd_file, upstream_sources
from lwsflow.controller.api.paths import UpstreamMissing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 on drift")
    args = ap.parse_args(argv)
    drift = 0
    try:
        sources = upstream_sources()
    except UpstreamMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for plural, src in sources.items():
        if not src.is_file():
            print(f"error: {src}: no such file", file=sys.stderr)
            return 2
        data = encode_packed(extract_crd_file(src))
        dest = PACKAGE_DIR / f"{plural}.json.gz"
        same = dest.is_file() and dest.read_bytes() == data
        if args.check:
            if not same:
                print(f"{dest}: differs from {src}", file=sys.stderr)
                drift += 1
        elif not same:
            write_file_atomic(dest, data)  # 0644: packaged data must be world-readable
            print(f"wrote {dest} ({len(data)} bytes)")
    return 1 if drift else 0


if __name__ == "__main__":
    sys.exit(main())
