"""Route latency: warm routing of new texts, `locus route --file` with 1,000 texts, cold starts.

1. warm: one `WorkspaceRouter`, loaded once; each new text routed alone (encode + score every
   LLM): median and p99 per query, and the encode / score split; and texts the workspace holds
   (cached vectors, no encoding);
2. `locus route --file` with 1,000 lines (up to half one-line texts the workspace holds, the
   rest new) as a subprocess: wall time, load time, time per query;
3. cold `locus route "..."` as a subprocess: a text the workspace holds (no text encoder load)
   and a new text (the text encoder is loaded), median of 3 runs each.

Needs a workspace with a trained artifact (e.g. after `make demo`: `.locus`).
Run: `.venv/bin/python benchmarks/bench_route.py [--workspace .locus] [--repeats 200]`
(`--only cold --cold-runs 9 --tag=-cold`: the cold starts alone).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, peak_memory_mb, report

from locus.pipeline.workspace_router import WorkspaceRouter
from locus.store import Store

QUERIES = [
    "What is the derivative of sin(x) * x^2 with respect to x?",
    "Under the Fourth Amendment, when may police search a car without a warrant?",
    "Which enzyme unwinds the DNA double helix during replication?",
    "A firm's marginal cost rises while price stays fixed. What happens to output?",
]
LOCUS = str(Path(sys.executable).with_name("locus"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def warm(store: Store, artifact: str, repeats: int, stored: list[str]) -> dict[str, float]:
    router = WorkspaceRouter(store, artifact)
    router.route_texts(QUERIES)  # warm-up: load the text encoder, allocate
    encode_ms, total_ms = [], []
    for i in range(repeats):
        text = QUERIES[i % len(QUERIES)] + f" (variant {i})"
        started = time.perf_counter()
        vectors = router.vectors_for([text])
        encoded = time.perf_counter()
        router.router.route(vectors, costs=router.costs)  # the fitted router, with its guard
        done = time.perf_counter()
        encode_ms.append((encoded - started) * 1000)
        total_ms.append((done - started) * 1000)
    score_ms = [t - e for t, e in zip(total_ms, encode_ms, strict=True)]
    stored_ms = []
    for text in stored[:repeats]:
        started = time.perf_counter()
        router.route_texts([text])
        stored_ms.append((time.perf_counter() - started) * 1000)
    return {
        "warm_route_stored_text_median_ms": round(statistics.median(stored_ms), 2),
        "llms": len(router.llm_ids),
        "warm_route_median_ms": round(statistics.median(total_ms), 2),
        "warm_route_p99_ms": round(percentile(total_ms, 0.99), 2),
        "warm_encode_median_ms": round(statistics.median(encode_ms), 2),
        "warm_score_median_ms": round(statistics.median(score_ms), 3),
    }


def run_cli(args: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run([LOCUS, *args], capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done


def route_file(workspace: Path, artifact: str, stored: list[str]) -> dict[str, float]:
    texts = [t for t in stored if "\n" not in t][:500]  # a line file holds one-line texts
    n_stored = len(texts)
    texts += [f"{QUERIES[i % len(QUERIES)]} (new {i})" for i in range(1000 - len(texts))]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "queries.txt"
        path.write_text("\n".join(texts) + "\n")
        seconds, done = run_cli(
            ["route", "--file", str(path), "-w", str(workspace), "--artifact", artifact, "--json"]
        )
    decisions = json.loads(done.stdout)
    found = re.search(r"loaded once in ([\d.]+) s, routed in ([\d.]+) ms per query", done.stderr)
    return {
        "file_queries": len(decisions),
        "file_queries_already_stored": n_stored,
        "file_wall_seconds": round(seconds, 2),
        "file_load_seconds": float(found.group(1)) if found else float("nan"),
        "file_route_ms_per_query": float(found.group(2)) if found else float("nan"),
    }


def cold(workspace: Path, artifact: str, stored_text: str, runs: int = 3) -> dict[str, float]:
    figures = {}
    for label, text in (
        ("cold_route_stored_text_s", stored_text),
        ("cold_route_new_text_s", "What is 17 * 23?"),
    ):
        times = [
            run_cli(["route", text, "-w", str(workspace), "--artifact", artifact])[0]
            for _ in range(runs)
        ]
        figures[label] = round(statistics.median(times), 2)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".locus")
    parser.add_argument("--artifact", default="default")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--cold-runs", type=int, default=3, help="cold starts per text (median)")
    parser.add_argument("--only", choices=["cold"], help="only the cold `locus route` figures")
    parser.add_argument("--tag", default="", help="Suffix of the result name.")
    args = parser.parse_args()
    with Store.open(args.workspace, create=False) as store:
        stored = [t for t in store.score_table().query_texts if t][:2000]
        figures: dict[str, float] = {}
        if args.only is None:
            figures |= warm(store, args.artifact, args.repeats, stored)
    if args.only is None:
        figures |= route_file(args.workspace, args.artifact, stored)
    figures |= cold(args.workspace, args.artifact, stored[0], args.cold_runs)
    figures["peak_memory_mb"] = round(peak_memory_mb())
    report(f"route{args.tag}", figures)


if __name__ == "__main__":
    main()
