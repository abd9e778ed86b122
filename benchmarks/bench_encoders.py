"""Text encoders side by side: throughput, single-text latency, cold start, memory.

Each encoder runs in its own fresh process (so cold start and peak memory are its own), on the
same MMLU-Pro query texts (a fixed sample by text hash from the real data). Derived models
(ONNX export, model2vec distillation) are built first, outside the timings, and the time to
build them is reported on its own line.

    python benchmarks/bench_encoders.py [--texts 1000] [--encoders minilm-static minilm ...]

Routing quality per encoder is measured by bench_accuracy.py --encoder NAME (see
benchmarks/README.md, "Text encoders"). No assertions: read the numbers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, require_shared_data, write_results

ENCODERS = ("minilm-static", "minilm-onnx-int8", "minilm-onnx", "minilm")

_CHILD = r"""
import json, resource, statistics, sys, time
started = time.perf_counter()
from locus.text import get_text_encoder
encoder = get_text_encoder(sys.argv[1])
encoder.encode("warm up the model")
cold = time.perf_counter() - started
texts = json.load(open(sys.argv[2]))
t = time.perf_counter()
encoder.encode(texts, batch_size=32)
batch_seconds = time.perf_counter() - t
single = []
for text in texts[:200]:
    t = time.perf_counter()
    encoder.encode(text)
    single.append(time.perf_counter() - t)
single.sort()
print(json.dumps({
    "name": encoder.name, "dim": encoder.dim,
    "cold_start_s": round(cold, 3),
    "texts_per_second": round(len(texts) / batch_seconds, 1),
    "single_text_ms_median": round(1000 * statistics.median(single), 3),
    "single_text_ms_p99": round(1000 * single[int(0.99 * (len(single) - 1))], 3),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    "torch_imported": "torch" in sys.modules,
}))
"""


def sample_texts(count: int) -> list[str]:
    """`count` MMLU-Pro query texts, the same on every run (the first by text hash), from the
    accuracy benchmark's workspace (imported from the real data if it is not there yet)."""
    from locus.store import Store
    from locus.store.ingest import import_path

    workspace = REPO_ROOT / ".bench" / "accuracy" / "mmlu-pro"
    with Store.open(workspace) as store:
        if not store.llm_ids():
            import_path(store, "mmlu-pro", require_shared_data() / "mmlu_pro" / "eval_results")
        table = store.score_table()
    pairs = sorted((h, t) for h, t in zip(table.text_hashes, table.query_texts, strict=True) if t)
    return [text for _, text in pairs[:count]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--encoders", nargs="+", default=list(ENCODERS))
    args = parser.parse_args()
    texts = sample_texts(args.texts)
    chars = sum(map(len, texts)) / len(texts)
    print(f"{len(texts)} MMLU-Pro texts, {chars:.0f} characters on average", flush=True)
    sample = REPO_ROOT / ".bench" / "encoder-texts.json"
    sample.parent.mkdir(exist_ok=True)
    sample.write_text(json.dumps(texts))
    rows = {}
    for name in args.encoders:
        started = time.perf_counter()  # build the derived model (once), outside the timings
        subprocess.run(
            [
                sys.executable,
                "-c",
                f"from locus.text import get_text_encoder as g; g({name!r}).encode('x')",
            ],
            check=True,
        )
        build = time.perf_counter() - started
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, name, str(sample)],
            check=True,
            capture_output=True,
            text=True,
        )
        row = json.loads(done.stdout.strip().splitlines()[-1])
        row["prepare_s_incl_build_if_missing"] = round(build, 1)
        rows[name] = row
        print(json.dumps({"encoder": name, **row}), flush=True)
    write_results("encoders", {"texts": len(texts), "mean_chars": round(chars), "encoders": rows})


if __name__ == "__main__":
    main()
