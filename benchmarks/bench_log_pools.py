"""Real pools trained from a one-LLM-per-query log: locus beside the per-task table and kNN
fitted on the same log, each scored by the dense truth.

Per seed: `bench_accuracy.py`'s workspace of the pool (its vectors) is copied, and each
training and validation query keeps the score of one LLM only, drawn uniformly among those
scored on it (a gateway that logged uniformly at random). The test split stays dense, so that
every router's hit@1 is the truth, not an estimate. Then `locus fit` (training seed = the log's
seed) and `locus evaluate` as `bench_accuracy.py` runs them, beside baselines fitted on the same
log: the best LLM per task and the best single LLM (their logged rates), and a kNN vote (each
LLM's mean score on its own k nearest logged queries, k in 5-100 chosen by the Brier score of
its votes on the logged validation pairs; the k IPS would choose and each k's test hit@1 are
recorded beside). With `--stream`, the fitted router
also replays the test queries as a stream with outcomes (`locus benchmark stream`'s no-change
scenario): the cold start from a log.

    python benchmarks/bench_log_pools.py --dataset zeroeval --seeds 0 1 2 [--stream]

Run `bench_accuracy.py --dataset D --seeds 0` once first (it builds the workspace).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, report

from locus.metrics import routing_accuracy
from locus.nn import TrainingConfig
from locus.offpolicy import overlap_of, selection_hit
from locus.pipeline import evaluate_workspace, fit_workspace, workspace_table
from locus.store import Store


def make_log(dense: Path, folder: Path, seed: int) -> dict[str, Any]:
    """Copy the dense workspace's database to `folder` and keep one score per training and
    validation query (the LLM drawn uniformly among those scored on it)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shutil.copy(dense / "locus.db", folder / "locus.db")
    with Store.open(folder, create=False) as store:
        data = workspace_table(store)
    logged = np.concatenate([data.rows("train"), data.rows("val")])
    rng = np.random.default_rng(seed)
    drop: list[tuple[str, str]] = []
    ids = list(data.table.llm_ids)
    for row in logged:
        scored = np.flatnonzero(~np.isnan(data.table.scores[row]))
        if len(scored) < 2:
            continue
        kept = rng.choice(scored)
        h = data.table.text_hashes[row]
        drop += [(h, ids[j]) for j in scored if j != kept]
    with sqlite3.connect(folder / "locus.db") as conn:
        conn.execute("CREATE TEMP TABLE dropped (text_hash TEXT, llm_id TEXT)")
        conn.executemany("INSERT INTO dropped VALUES (?, ?)", drop)
        conn.execute(
            """DELETE FROM scores WHERE rowid IN (
                SELECT s.rowid FROM scores s
                JOIN query_aliases a ON a.id = s.alias
                JOIN queries q ON q.id = a."query"
                JOIN llms l ON l.id = s.llm
                JOIN dropped d ON d.text_hash = q.text_hash AND d.llm_id = l.llm_id)"""
        )
        # the cached content checksums and fitted state describe the dense table
        conn.execute("DELETE FROM meta WHERE key = 'content_checksums' OR key LIKE '%:%'")
        conn.execute(
            "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'data_version'"
        )
    shutil.rmtree(folder / "artifacts", ignore_errors=True)
    with Store.open(folder, create=False) as store:
        after = workspace_table(store)
    found = overlap_of(after.table.scores[np.concatenate([after.rows("train"), after.rows("val")])])
    return {"dropped_scores": len(drop), "llms_per_logged_query": found.llms_per_query}


def knn_on_log(folder: Path) -> dict[str, Any]:
    """Each LLM's mean score on its own k nearest logged training queries; k chosen by the
    Brier score of the votes on the logged validation pairs; hit@1 on the dense test."""
    with Store.open(folder, create=False) as store:
        data = workspace_table(store)
    scores = data.table.scores.astype(np.float64)
    unit = data.vectors / np.maximum(np.linalg.norm(data.vectors, axis=1, keepdims=True), 1e-12)
    train, val, test = data.rows("train"), data.rows("val"), data.rows("test")
    ks = (5, 10, 20, 50, 100)

    def votes(rows: np.ndarray) -> dict[int, np.ndarray]:
        sims = unit[rows] @ unit[train].T
        out = {k: np.full((len(rows), scores.shape[1]), -1.0) for k in ks}
        for j in range(scores.shape[1]):
            own = np.flatnonzero(~np.isnan(scores[train, j]))
            if not len(own):
                continue
            order = np.argsort(-sims[:, own], axis=1)
            for k in ks:
                nearest = own[order[:, : min(k, len(own))]]
                out[k][:, j] = scores[train[nearest], j].mean(axis=1)
        return out

    on_val, on_test = votes(val), votes(test)
    logged = ~np.isnan(scores[val])

    def brier(k: int) -> float:  # of the vote of each logged (query, LLM) pair: valid on a log
        return float(np.mean((np.clip(on_val[k], 0, 1)[logged] - scores[val][logged]) ** 2))

    k = min(ks, key=brier)
    return {
        "k": k,
        "hit@1": routing_accuracy(on_test[k], scores[test]),
        "hit@1_by_k": {str(k): routing_accuracy(on_test[k], scores[test]) for k in ks},
        "k_by_ips": max(ks, key=lambda k: selection_hit(on_val[k], scores[val])),
    }


def stream(folder: Path, artifact: str, seed: int) -> dict[str, Any]:
    """The no-change replay of the test queries from the log-fitted router: each policy's
    hit@1 and regret (the bandits start from the log's rates, as locus does)."""
    from locus.benchmark.stream import load_stream, run_stream

    with Store.open(folder, create=False) as store:
        found = run_stream(load_stream(store, artifact), seeds=[seed], scenarios=["no change"])
    return {
        policy.split(" / ")[1]: {k: row[k]["mean"] for k in ("hit@1", "regret")}
        for policy, row in found["summary"].items()
    }


def mean_sd(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()
    dense = args.workspace / args.dataset
    if not (dense / "locus.db").exists():
        sys.exit(f"no workspace at {dense}: run bench_accuracy.py --dataset {args.dataset} first")
    runs: dict[int, dict[str, Any]] = {}
    for seed in args.seeds:
        folder = args.workspace / f"{args.dataset}-log{seed}"
        made = make_log(dense, folder, seed)
        name = f"log-seed{seed}"
        with Store.open(folder, create=False) as store:
            started = time.perf_counter()
            fit_workspace(store, TrainingConfig(seed=seed), name=name)
            fit_seconds = time.perf_counter() - started
            result = evaluate_workspace(store, name=name).as_dict()
        knn = knn_on_log(folder)
        run = {
            **made,
            "fit_seconds": fit_seconds,
            "locus": result["routing"]["hit@1"],
            "locus_unguarded": result["routing"]["unguarded_hit@1"],
            "auroc": result["correctness"]["auroc"],
            "per_task": result["baselines"]["best_llm_per_task"],
            "best_single": result["baselines"]["best_single_llm"],
            "oracle": result["baselines"]["oracle"],
            "knn": knn["hit@1"],
            "knn_k": knn["k"],
            "knn_k_by_ips": knn["k_by_ips"],
            "knn_hit@1_by_k": knn["hit@1_by_k"],
            "guard": result["routing"]["guard"],
        }
        if args.stream:
            run["stream"] = stream(folder, name, seed)
            print(f"seed {seed}: stream (no change) {run['stream']}", flush=True)
        runs[seed] = run
        print(
            f"seed {seed}: locus {run['locus']:.4f} (unguarded {run['locus_unguarded']:.4f}), "
            f"per task {run['per_task']:.4f}, kNN {run['knn']:.4f} (k {knn['k']}), best single "
            f"{run['best_single']:.4f}, oracle {run['oracle']:.4f}; fit {fit_seconds:.0f} s",
            flush=True,
        )
    keys = ("locus", "locus_unguarded", "auroc", "per_task", "knn", "best_single", "oracle")
    summary = {k: mean_sd([r[k] for r in runs.values()]) for k in keys}
    summary["fit_seconds"] = mean_sd([r["fit_seconds"] for r in runs.values()])
    if args.stream:
        summary["stream"] = {
            policy: {m: mean_sd([r["stream"][policy][m] for r in runs.values()]) for m in by}
            for policy, by in runs[args.seeds[0]]["stream"].items()
        }
    report(f"log-pool-{args.dataset}", {"summary": summary, "per_seed": runs})


if __name__ == "__main__":
    main()
