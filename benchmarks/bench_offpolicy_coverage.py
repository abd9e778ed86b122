"""Off-policy estimates against the truth: do their 95% intervals cover it?

On a fitted dense pool (`bench_accuracy.py`'s workspace, seed 0's artifact), each of 20 seeds
draws a uniformly logged one-LLM-per-query log of the test queries (each query answered by one
LLM drawn uniformly among those scored on it, its logging probability 1 / that count, only that
LLM's score revealed). From the log, `locus.offpolicy` estimates the hit@1 of four routers, each
choosing among the LLMs scored on the query: LOCUS (the fitted router, guard included), its kNN
part alone, the best LLM per task and the best single LLM (both by their training means); IPS,
and doubly robust with LOCUS's P(correct) as the reward model. The truth is each router's hit@1
on the dense test table. Per router and estimator: in how many seeds the interval covers the
truth, the mean absolute error, the mean interval width.

    python benchmarks/bench_offpolicy_coverage.py --workspace .bench/accuracy/routerbench \
        --artifact bench-all-MiniLM-L6-v2-onnx-int8-head+tail-stream-seed0 --pool routerbench
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import report


def choices(workspace: Path, artifact: str) -> tuple[dict[str, np.ndarray], np.ndarray, Any]:
    """Each router's column per test query (among the LLMs scored on it), the dense truth,
    and LOCUS's P(correct) (the DR reward model)."""
    from locus.metrics import best_per_task_choices, column_means
    from locus.pipeline.data import workspace_table
    from locus.pipeline.workspace_router import WorkspaceRouter
    from locus.routing.decision import RouteRequest
    from locus.store import Store

    with Store.open(workspace, create=False) as store:
        router = WorkspaceRouter(store, artifact, outcomes=False)
        data = workspace_table(store, split_seed=router.manifest.split_seed)
    ids = list(router.llm_ids)
    columns = [data.table.llm_index(llm) for llm in ids]
    scores = data.table.scores[:, columns].astype(np.float64)
    train, test = data.rows("train"), data.rows("test")
    test = test[(~np.isnan(scores[test])).sum(axis=1) >= 2]
    truth = scores[test]
    missing = np.isnan(truth)
    vectors = data.vectors[test]
    proba = np.asarray(router.router.predict_proba(vectors), np.float64)
    found: dict[str, np.ndarray] = {}
    locus = []
    for i in range(len(test)):
        gone = tuple(ids[j] for j in np.flatnonzero(missing[i]))
        [decision] = router.router.route(vectors[i : i + 1], RouteRequest(top=1, unavailable=gone))
        locus.append(ids.index(decision.llm_id))
    found["locus"] = np.array(locus)
    knn = router.router.knn
    if knn is not None:
        votes = np.asarray(knn.predict_proba(vectors), np.float64)
        found["knn"] = np.argmax(np.where(missing, -np.inf, votes), axis=1)
    tasks = list(data.table.tasks) if data.table.tasks else []
    if tasks and len({tasks[i] for i in train}) > 1:
        picks = best_per_task_choices(
            scores[train], [tasks[i] for i in train], truth, [tasks[i] for i in test]
        )
        if (picks >= 0).all():
            found["best per task"] = picks
    means = column_means(scores[train], -np.inf)
    found["best single"] = np.argmax(np.where(missing, -np.inf, means[None, :]), axis=1)
    return found, truth, proba


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--artifact", default="default")
    parser.add_argument("--pool", required=True)
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    from locus.offpolicy import doubly_robust, ips

    started = time.perf_counter()
    routers, truth, proba = choices(args.workspace, args.artifact)
    scored = ~np.isnan(truth)
    rows = np.arange(len(truth))
    figures: dict[str, Any] = {"pool": args.pool, "queries": len(truth), "seeds": args.seeds}
    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {"ips": [], "dr": []} for name in routers
    }
    true_hit = {name: float(truth[rows, choice].mean()) for name, choice in routers.items()}
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        logged_column = np.array([rng.choice(np.flatnonzero(s)) for s in scored])
        log = np.full(truth.shape, np.nan)
        log[rows, logged_column] = truth[rows, logged_column]
        propensity = np.where(scored, 1.0 / scored.sum(axis=1, keepdims=True), 1.0)
        for name, choice in routers.items():
            for method, estimate in (
                ("ips", ips(choice, log, propensity)),
                ("dr", doubly_robust(choice, log, proba, propensity)),
            ):
                low, high = estimate.interval
                runs[name][method].append({
                    "value": estimate.value, "low": low, "high": high,
                    "covers": float(low <= true_hit[name] <= high),
                })  # fmt: skip
    summary = {}
    for name, by_method in runs.items():
        row: dict[str, Any] = {"truth": true_hit[name]}
        for method, found in by_method.items():
            values = np.array([f["value"] for f in found])
            row[method] = {
                "covered": int(sum(f["covers"] for f in found)),
                "mean_abs_error": float(np.abs(values - true_hit[name]).mean()),
                "mean_width": float(np.mean([f["high"] - f["low"] for f in found])),
            }
        summary[name] = row
        print(
            f"{name}: truth {true_hit[name]:.4f}; "
            + "; ".join(
                f"{m} covered {row[m]['covered']}/{args.seeds}, error "
                f"{row[m]['mean_abs_error']:.4f}, width {row[m]['mean_width']:.4f}"
                for m in ("ips", "dr")
            ),
            flush=True,
        )
    figures["summary"] = summary
    figures["seconds"] = time.perf_counter() - started
    report(f"offpolicy-coverage-{args.pool}", figures)


if __name__ == "__main__":
    main()
