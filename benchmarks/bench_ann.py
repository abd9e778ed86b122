"""The kNN router's neighbour search at 10^5-10^6 training queries: exact (one product with
every training vector) against the HNSW graph (`locus.routing.ann`), on one pool, in one run.

Training queries are synthetic texts drawn as `bench_scale.py` draws them (20 tasks, 12 words
from each task's vocabulary), encoded by the static encoder (minilm-static, 256-d); each of
`--llms` LLMs is right on a query with a chance that varies smoothly with its vector (a random
direction per LLM), so the neighbourhood carries signal. Query vectors are new texts.

Printed per size: graph build time and bytes, read-back time, one-query search time (median of
`--queries` routed one at a time, the stack's ks 50 and 500 plus k 20: the 1,000 nearest) and a
512-query batch, both searches; recall of the 1,000 nearest; what routing reads: mean |P exact -
P graph| and the share of queries routed to the same LLM; peak RSS.

    python benchmarks/bench_ann.py --size 80000 --size 300000 --size 1000000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import peak_memory_mb, report

WORDS = [f"w{i}" for i in range(4000)]
KS = [20, 50, 500]


def texts(n: int, seed: int, tasks: int = 20) -> list[str]:
    """Synthetic query texts; one vocabulary per task, the same in every call."""
    vocab = [
        np.random.default_rng(100 + t).choice(len(WORDS), 60, replace=False) for t in range(tasks)
    ]
    rng = np.random.default_rng(seed)
    task = rng.integers(tasks, size=n)
    return [
        f"q{seed}-{i} " + " ".join(WORDS[w] for w in rng.choice(vocab[t], 12))
        for i, t in enumerate(task)
    ]


def timed_ms(work, runs: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for i in range(runs):
        start = time.perf_counter()
        work(i)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def measure(size: int, n_llms: int, n_queries: int, encoder) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from locus.routing import Evidence, KNNRouter
    from locus.routing.ann import Graph

    start = time.perf_counter()
    vectors = np.asarray(encoder.encode(texts(size, 0)), dtype=np.float32)
    queries = np.asarray(encoder.encode(texts(max(n_queries, 512), 1)), dtype=np.float32)
    encoded = time.perf_counter() - start
    rng = np.random.default_rng(0)
    taste = rng.normal(size=(vectors.shape[1], n_llms)).astype(np.float32) * 8
    chance = 1 / (1 + np.exp(-(vectors @ taste - np.median(vectors @ taste, axis=0))))
    scores = (rng.random(chance.shape) < chance).astype(np.float32)
    train = Evidence(vectors, scores, tuple(f"llm-{i}" for i in range(n_llms)))

    exact = KNNRouter(k=20, search="exact").fit(train)
    start = time.perf_counter()
    graph_router = KNNRouter(k=20, search="graph").fit(train)
    built = time.perf_counter() - start
    blob = graph_router._arrays()["graph"]
    start = time.perf_counter()
    Graph.from_bytes(blob)
    read_back = time.perf_counter() - start
    graph = graph_router._graph()
    assert graph is not None

    one = {
        name: timed_ms(lambda i, r=router: r._neighbour_means(queries[i : i + 1], KS), n_queries)
        for name, router in (("exact", exact), ("graph", graph_router))
    }
    batch = {
        name: timed_ms(lambda i, r=router: r._neighbour_means(queries[:512], KS), 2) / 512
        for name, router in (("exact", exact), ("graph", graph_router))
    }
    unit = exact.vectors_
    q = queries[:n_queries] / np.linalg.norm(queries[:n_queries], axis=1, keepdims=True)
    truth = np.argpartition(-(q @ unit.T), 999, axis=1)[:, :1000]
    found = graph.search(q, 1000)
    assert found is not None
    shared = [len(np.intersect1d(a, b)) for a, b in zip(truth, found[0], strict=True)]
    recall = np.mean(shared) / 1000
    near = exact._neighbour_means(queries[:512], KS)
    approx = graph_router._neighbour_means(queries[:512], KS)
    return {
        f"{size}: encode s": round(encoded, 1),
        f"{size}: graph build s": round(built, 1),
        f"{size}: graph MB": round(blob.nbytes / 1e6, 1),
        f"{size}: graph read back s": round(read_back, 2),
        f"{size}: one query exact ms": round(one["exact"], 2),
        f"{size}: one query graph ms": round(one["graph"], 2),
        f"{size}: batch of 512 exact ms per query": round(batch["exact"], 3),
        f"{size}: batch of 512 graph ms per query": round(batch["graph"], 3),
        f"{size}: recall of the 1,000 nearest": round(float(recall), 4),
        **{
            f"{size}: k={k} mean |P exact - P graph|": round(float(np.abs(a - b).mean()), 5)
            for k, a, b in zip(KS, near, approx, strict=True)
        },
        **{
            f"{size}: k={k} same LLM routed": round(float((a.argmax(1) == b.argmax(1)).mean()), 4)
            for k, a, b in zip(KS, near, approx, strict=True)
        },
        f"{size}: peak RSS MB so far": round(peak_memory_mb()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, action="append", help="training queries (repeat)")
    parser.add_argument("--llms", type=int, default=50)
    parser.add_argument("--queries", type=int, default=200, help="routed one at a time")
    args = parser.parse_args()
    from locus.text.static import StaticEncoder

    encoder = StaticEncoder()
    figures: dict[str, float] = {}
    for size in args.size or [80_000, 300_000]:
        figures.update(measure(size, args.llms, args.queries, encoder))
        print(f"done {size}", flush=True)
    report("ann", figures)


if __name__ == "__main__":
    main()
