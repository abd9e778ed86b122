"""Routing headroom: how much can any router gain over the best single LLM on this data?

LOCUS routing is judged against the best single LLM and the best LLM per task. When it only ties
them, the question is whether the data allows more. This benchmark measures, on the test queries
of the same hash split that `locus fit` uses:

- references that see every training label: best single LLM, best LLM per task, a per-LLM
  logistic probe on the query vectors, and the oracle;
- estimators that see, per LLM, only its anchors (the evidence LOCUS embeds it from): best LLM
  chosen on anchors, per-task accuracy shrunk towards the LLM's overall accuracy (uses the task
  labels LOCUS never sees), a per-LLM logistic probe, and a kNN vote over the LLM's anchors;
- per task, how far the top LLMs sit from their overall accuracy (where the gains could be);
- for each trained artifact given with --artifacts: its test hit@1, how many directions its LLM
  embeddings use, and how much of its predicted logit is a per-(LLM, query) interaction rather
  than LLM quality plus query difficulty (only the interaction can change a routing choice).

It reuses a workspace prepared by `bench_accuracy.py` (imported and encoded):

    .venv/bin/python benchmarks/bench_headroom.py --dataset mmlu-pro --artifacts bench-seed0
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, report
from bench_accuracy import DATASETS
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from locus import metrics
from locus.data.anchor_choice import choose_anchors
from locus.locus import Locus
from locus.pipeline import WorkspaceTable, load_workspace_locus, workspace_table
from locus.store import Store

Array = NDArray[np.float64]


def seeded_anchors(data: WorkspaceTable, count: int, seed: int) -> list[NDArray[np.int64]]:
    """Per LLM, the anchors `locus fit --seed SEED` chooses (`locus.data.anchor_choice`)."""
    observed = ~np.isnan(data.table.scores)
    return choose_anchors(observed, data.rows("train"), count, np.random.default_rng(seed))


def artifact_anchors(data: WorkspaceTable, anchors: dict[str, list[str]]) -> list[NDArray[Any]]:
    """The anchors a trained artifact embedded each LLM from, as rows of the table."""
    row_of = {text_hash: row for row, text_hash in enumerate(data.table.text_hashes)}
    return [
        np.array([row_of[h] for h in anchors.get(llm, []) if h in row_of], dtype=np.int64)
        for llm in data.table.llm_ids
    ]


def probe(vectors: Array, rows: NDArray[Any], labels: Array, c: float = 0.1) -> LogisticRegression:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticRegression(C=c, max_iter=300).fit(vectors[rows], labels >= 0.5)


def probe_proba(
    data: WorkspaceTable, per_llm_rows: list[NDArray[Any]], test: NDArray[Any]
) -> Array:
    """P(correct) on `test` rows from one logistic probe per LLM fitted on its rows."""
    scores, vectors = data.table.scores, data.vectors
    proba = np.zeros((len(test), data.table.n_llms))
    for llm, rows in enumerate(per_llm_rows):
        labels = scores[rows, llm]
        if len(np.unique(labels >= 0.5)) < 2:  # a probe needs both outcomes
            proba[:, llm] = float(np.mean(labels >= 0.5)) if len(labels) else 0.0
            continue
        proba[:, llm] = probe(vectors, rows, labels).predict_proba(vectors[test])[:, 1]
    return proba


def shrunk_task_proba(
    data: WorkspaceTable, anchors: list[NDArray[Any]], test: NDArray[Any], strength: float = 50
) -> Array:
    """Per LLM and task: (task successes + strength x overall) / (task anchors + strength)."""
    tasks = np.asarray(data.table.tasks, dtype=object)
    scores = data.table.scores
    proba = np.zeros((len(test), data.table.n_llms))
    for llm, rows in enumerate(anchors):
        overall = float(np.mean(scores[rows, llm])) if len(rows) else 0.0
        for task in set(tasks[test]):
            in_task = rows[tasks[rows] == task]
            estimate = (scores[in_task, llm].sum() + strength * overall) / (len(in_task) + strength)
            proba[tasks[test] == task, llm] = estimate
    return proba


def knn_proba(
    data: WorkspaceTable,
    anchors: list[NDArray[Any]],
    test: NDArray[Any],
    k: int = 100,
    strength: float = 30,
) -> Array:
    """Per LLM: its mean score on the k anchors nearest each test query (cosine on centred query
    vectors), shrunk towards its overall accuracy."""
    centred = data.vectors - data.vectors[data.rows("train")].mean(axis=0)
    centred /= np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), 1e-12)
    scores, centred_test = data.table.scores, centred[test]
    proba = np.zeros((len(test), data.table.n_llms))
    for llm, rows in enumerate(anchors):
        if len(rows) == 0:
            continue
        labels = scores[rows, llm]
        kk = min(k, len(rows))
        similarity = centred_test @ centred[rows].T  # (n_test, n_anchors)
        nearest = np.argpartition(-similarity, kk - 1, axis=1)[:, :kk]
        proba[:, llm] = (labels[nearest].sum(axis=1) + strength * labels.mean()) / (kk + strength)
    return proba


def anchored_estimators(data: WorkspaceTable, anchors: list[NDArray[Any]]) -> dict[str, float]:
    test, truth = data.rows("test"), data.table.scores[data.rows("test")]
    tasks = list(data.table.tasks)
    n_llms = data.table.n_llms
    anchor_only = np.full_like(data.table.scores, np.nan)
    for llm, rows in enumerate(anchors):
        anchor_only[rows, llm] = data.table.scores[rows, llm]
    train = data.rows("train")
    return {
        "best_single_chosen_on_anchors": metrics.best_single_accuracy(anchor_only[train], truth)[1],
        "best_per_task_chosen_on_anchors": metrics.best_per_task_accuracy(
            anchor_only[train], [tasks[i] for i in train], truth, [tasks[i] for i in test]
        ),
        "shrunk_per_task": metrics.routing_accuracy(shrunk_task_proba(data, anchors, test), truth),
        "logistic_probe": metrics.routing_accuracy(probe_proba(data, anchors, test), truth),
        "knn_over_anchors": metrics.routing_accuracy(knn_proba(data, anchors, test), truth),
        "mean_anchors": float(np.mean([len(a) for a in anchors])) if n_llms else 0.0,
    }


def task_profile(data: WorkspaceTable, top: int = 5) -> dict[str, dict[str, float]]:
    """Per task, for the `top` LLMs by training accuracy: task accuracy - overall accuracy."""
    train = data.rows("train")
    scores = data.table.scores[train]
    tasks = np.asarray([data.table.tasks[i] for i in train], dtype=object)
    overall = np.nanmean(scores, axis=0)
    leaders = np.argsort(-overall)[:top]
    profile: dict[str, dict[str, float]] = {}
    for task in sorted({t for t in tasks if t is not None}):
        with warnings.catch_warnings():  # an LLM not evaluated on a task gives NaN, quietly
            warnings.simplefilter("ignore", RuntimeWarning)
            in_task = np.nanmean(scores[tasks == task], axis=0)
        profile[task] = {
            data.table.llm_ids[j]: round(float(in_task[j] - overall[j]), 3) for j in leaders
        }
    return profile


def artifact_diagnostics(model: Locus, data: WorkspaceTable) -> dict[str, Any]:
    llm_ids = [llm for llm in data.table.llm_ids if llm in set(model.llm_ids_)]
    test = data.rows("test")
    pool_scores = data.table.select_llms(llm_ids).scores
    truth = pool_scores[test]
    proba = np.clip(model.predict_proba(data.vectors[test], llm_ids), 1e-6, 1 - 1e-6)
    logits = np.log(proba / (1 - proba))
    llm_part = logits.mean(axis=0, keepdims=True) - logits.mean()
    query_part = logits.mean(axis=1, keepdims=True) - logits.mean()
    interaction = logits - logits.mean() - llm_part - query_part
    embeddings = np.stack([model.llm_embeddings_[model.llm_ids_.index(llm)] for llm in llm_ids])
    centred = embeddings - embeddings.mean(axis=0)
    left, singular, _ = np.linalg.svd(centred, full_matrices=False)
    share = singular**2 / np.sum(singular**2)
    accuracy = np.nanmean(pool_scores[data.rows("train")], axis=0)
    return {
        "test_hit@1": metrics.routing_accuracy(proba, truth),
        "embedding_variance_share_top3": [round(float(s), 3) for s in share[:3]],
        "corr_first_direction_vs_accuracy": round(
            abs(float(np.corrcoef(left[:, 0] * singular[0], accuracy)[0, 1])), 3
        ),
        "logit_variance": {
            "llm": round(float(np.var(llm_part)), 4),
            "query": round(float(np.var(query_part)), 4),
            "interaction": round(float(np.var(interaction)), 4),
        },
        "routed_to": {
            llm_ids[j]: int(n)
            for j, n in enumerate(
                np.bincount(metrics.routing_choices(proba, truth), minlength=len(llm_ids))
            )
            if n
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="mmlu-pro", choices=DATASETS)
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    parser.add_argument("--anchors", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--artifacts", nargs="*", default=[], help="trained artifacts to inspect")
    args = parser.parse_args()
    workspace = args.workspace / args.dataset
    if not (workspace / "locus.db").exists():
        sys.exit(f"no workspace at {workspace}; run bench_accuracy.py --dataset {args.dataset}")
    with Store.open(workspace) as store:
        data = workspace_table(store)
        test, train = data.rows("test"), data.rows("train")
        truth = data.table.scores[test]
        tasks = list(data.table.tasks)
        observed_train = [
            train[~np.isnan(data.table.scores[train, j])] for j in range(data.table.n_llms)
        ]
        figures: dict[str, Any] = {
            "dataset": args.dataset,
            "llms": data.table.n_llms,
            "train_queries": len(train),
            "test_queries": len(test),
            "all_training_labels": {
                "best_single": metrics.best_single_accuracy(data.table.scores[train], truth)[1],
                "best_per_task": metrics.best_per_task_accuracy(
                    data.table.scores[train],
                    [tasks[i] for i in train],
                    truth,
                    [tasks[i] for i in test],
                ),
                "logistic_probe": metrics.routing_accuracy(
                    probe_proba(data, observed_train, test), truth
                ),
                "shrunk_per_task": metrics.routing_accuracy(
                    shrunk_task_proba(data, observed_train, test), truth
                ),
                "oracle": metrics.oracle_accuracy(truth),
            },
        }
        for count in args.anchors:
            runs = [
                anchored_estimators(data, seeded_anchors(data, count, seed)) for seed in args.seeds
            ]
            figures[f"anchors_{count}"] = {
                key: {
                    "mean": round(float(np.mean([r[key] for r in runs])), 4),
                    "sd": round(float(np.std([r[key] for r in runs], ddof=1)), 4)
                    if len(runs) > 1
                    else 0.0,
                }
                for key in runs[0]
            }
            print(f"anchors {count}: done", flush=True)
        figures["task_minus_overall_top_llms"] = task_profile(data)
        for name in args.artifacts:
            model = load_workspace_locus(store, name)
            diagnostics = artifact_diagnostics(model, data)
            diagnostics["same_anchors"] = anchored_estimators(
                data, artifact_anchors(data, model.anchors_)
            )
            figures[f"artifact_{name}"] = diagnostics
    report(f"headroom-{args.dataset}", figures)


if __name__ == "__main__":
    main()
