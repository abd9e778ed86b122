"""Encode benchmark: throughput (queries/s) of the default text encoder on real query texts.

Encodes a fixed sample of MMLU-Pro query texts (question + options) with all-MiniLM-L6-v2 on CPU,
at a few batch sizes, and reports queries per second and peak memory.
Run: `.venv/bin/python benchmarks/bench_encode.py [--sample 1024]`
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import peak_memory_mb, report, require_shared_data

from locus.data.importers import get_importer
from locus.text import get_text_encoder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sample", type=int, default=1024)
    args = parser.parse_args()
    batch = get_importer("mmlu-pro")(require_shared_data() / "mmlu_pro" / "eval_results")
    texts = batch.queries["query_text"].dropna().tolist()[: args.sample]
    encoder = get_text_encoder()
    started = time.perf_counter()
    encoder.encode(texts[:8])
    load_s = time.perf_counter() - started
    figures: dict[str, object] = {
        "encoder": encoder.name,
        "dim": encoder.dim,
        "texts": len(texts),
        "mean_chars": round(sum(map(len, texts)) / len(texts)),
        "load_and_warm_s": round(load_s, 2),
    }
    for batch_size in (16, 64, 128):
        started = time.perf_counter()
        encoder.encode(texts, batch_size=batch_size)
        seconds = time.perf_counter() - started
        figures[f"queries_per_s_batch_{batch_size}"] = round(len(texts) / seconds, 1)
    figures["peak_memory_mb"] = round(peak_memory_mb())
    report("encode", figures)


if __name__ == "__main__":
    main()
