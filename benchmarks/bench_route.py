"""Route latency: one new query text end to end (encode + score every LLM) in a warm process.

Needs a workspace with a trained artifact (e.g. after `make demo`: `.locus`).
Run: `.venv/bin/python benchmarks/bench_route.py [--workspace .locus] [--repeats 200]`
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, peak_memory_mb, report

from locus.pipeline import load_workspace_locus
from locus.store import Store
from locus.text import get_text_encoder

QUERIES = [
    "What is the derivative of sin(x) * x^2 with respect to x?",
    "Under the Fourth Amendment, when may police search a car without a warrant?",
    "Which enzyme unwinds the DNA double helix during replication?",
    "A firm's marginal cost rises while price stays fixed. What happens to output?",
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".locus")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    with Store.open(args.workspace, create=False) as store:
        encoder = get_text_encoder(store.text_encoder)
        model = load_workspace_locus(store, text_encoder=encoder)
    for text in QUERIES:  # warm-up: load weights, allocate
        model.route(text)
    encode_ms, score_ms, total_ms = [], [], []
    for i in range(args.repeats):
        text = QUERIES[i % len(QUERIES)] + f" (variant {i})"
        started = time.perf_counter()
        vector = encoder.encode([text])
        encoded = time.perf_counter()
        model.route(vector)
        done = time.perf_counter()
        encode_ms.append((encoded - started) * 1000)
        score_ms.append((done - encoded) * 1000)
        total_ms.append((done - started) * 1000)
    figures = {
        "llms": len(model.llm_ids_),
        "repeats": args.repeats,
        "route_median_ms": round(statistics.median(total_ms), 2),
        "route_p90_ms": round(sorted(total_ms)[int(0.9 * len(total_ms))], 2),
        "encode_median_ms": round(statistics.median(encode_ms), 2),
        "score_median_ms": round(statistics.median(score_ms), 2),
        "peak_memory_mb": round(peak_memory_mb()),
    }
    report("route", figures)


if __name__ == "__main__":
    main()
