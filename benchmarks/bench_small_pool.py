"""The issue's small pool: 4 LLMs x 200 real MMLU-Pro questions (50 each of maths, law,
computer science and history), one CSV per LLM with the columns people have (model, prompt,
category, correct), planted per-task skills; `locus fit` defaults.

Routing every one of the 200 questions, the expected hit@1 from the planted skills: the router
of texts, the router told each question's task (`locus route --task`), the per-task table
(reads the true task), the per-task table reading the task from the text (the nearest task
centroid of the other folds' questions, 5 folds), the best single LLM; and how often the text
gives the task away (the majority task of a question's 20 nearest other questions). On 400
questions of the same tasks the pool never saw, how well its P(correct) reads the planted
skills (`fresh_calibration`). And `locus evaluate --folds 5` on the pool: every question routed
once by a router fitted without it, scored by the drawn outcomes, beside the same baselines
(`out_of_fold`). Each seed draws other questions and other scores.

    python benchmarks/bench_small_pool.py --seeds 0 1 2
    python benchmarks/bench_small_pool.py --seeds 0 1 2 --without-tasks

Writes results/small-pool.json (small-pool-without-tasks.json; `--tag` adds a suffix).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import csv_pool_router, report, require_shared_data

from locus.pipeline.evaluate_folds import evaluate_folds
from locus.pipeline.evaluation_results import Evaluation
from locus.pipeline.workspace_router import WorkspaceRouter
from locus.routing.stacked_fit import knn_task_votes

SKILL = {
    "math-llm": {"math": 0.92, "law": 0.40, "computer science": 0.55, "history": 0.50},
    "law-llm": {"math": 0.35, "law": 0.90, "computer science": 0.30, "history": 0.55},
    "coder-llm": {"math": 0.55, "law": 0.30, "computer science": 0.93, "history": 0.45},
    "small-llm": {"math": 0.35, "law": 0.45, "computer science": 0.40, "history": 0.55},
}
TASKS = tuple(SKILL["math-llm"])
LANDLORD = "Can my landlord evict me without notice?"
NEAREST = 20  # the plain vote's neighbours (`nearest_vote`)


def expected(chosen: list[str], tasks: list[str]) -> float:
    return float(np.mean([SKILL[llm][t] for llm, t in zip(chosen, tasks, strict=True)]))


def tasks_read_from_text(vectors: np.ndarray, tasks: list[str], folds: int = 5) -> list[str]:
    """Each question's task by the nearest task centroid of the other folds' questions."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    fold = np.arange(len(tasks)) % folds
    read = [""] * len(tasks)
    labels = np.asarray(tasks)
    for f in range(folds):
        rest = fold != f
        centroids = np.stack([unit[rest & (labels == t)].mean(axis=0) for t in TASKS])
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
        for row in np.flatnonzero(~rest):
            read[row] = TASKS[int(np.argmax(centroids @ unit[row]))]
    return read


def expected_log_loss(proba: np.ndarray, planted: np.ndarray) -> float:
    """The log-loss P(correct) `proba` is expected to have where each cell is right with its
    `planted` probability (the planted entropy at best)."""
    p = np.clip(proba, 1e-6, 1 - 1e-6)
    return float(np.mean(-(planted * np.log(p) + (1 - planted) * np.log(1 - p))))


def fresh_calibration(router: WorkspaceRouter, fresh: pd.DataFrame) -> dict[str, float]:
    """P(correct) of every LLM on questions the pool never saw, against the planted skills:
    the router's expected log-loss from the text and told the task, beside its own task vote
    (the per-task rates blended by the text's neighbours) and the per-task table told the task;
    and each specialist's mean P(correct) on its own task, told it, less its planted skill."""
    texts, tasks = list(fresh["question"]), list(fresh["category"])
    vectors = router.vectors_for(texts)
    llms = list(router.router.llm_ids)
    planted = np.array([[SKILL[llm][t] for llm in llms] for t in tasks])
    from_text = np.asarray(router.router.predict_proba(vectors), np.float64)
    told = np.asarray(router.router.predict_proba_given_tasks(vectors, tasks), np.float64)
    knn = router.router.knn
    assert knn is not None and knn.task_vote_ is not None
    theirs = list(knn.llm_ids)
    columns = [theirs.index(llm) for llm in llms]
    vote = knn_task_votes(knn, vectors, theirs)  # the kNN router's order: `given` writes it
    table = knn.task_vote_.given(tasks, vote)[:, columns]
    vote = vote[:, columns]
    own = {"math-llm": "math", "law-llm": "law", "coder-llm": "computer science"}
    labels = np.asarray(tasks)
    return {
        "fresh_log_loss_router_from_text": expected_log_loss(from_text, planted),
        "fresh_log_loss_task_vote_from_text": expected_log_loss(vote, planted),
        "fresh_log_loss_router_task_given": expected_log_loss(told, planted),
        "fresh_log_loss_per_task_table": expected_log_loss(table, planted),
        "fresh_log_loss_planted": expected_log_loss(planted, planted),
        "specialist_told_minus_planted": float(
            np.mean(
                [
                    told[labels == t, llms.index(llm)].mean() - SKILL[llm][t]
                    for llm, t in own.items()
                ]
            )
        ),
    }


def out_of_fold(result: Evaluation) -> dict[str, float]:
    """`locus evaluate --folds 5` on the pool: each question routed once by a router fitted on
    the other four fifths, hit@1 from the drawn scores (not the planted skills)."""
    routing, base = result.routing, result.baselines
    assert routing.task_given_hit_at_1 is not None
    assert base.best_llm_per_task_from_text is not None
    return {
        "folds_router_from_text": routing.hit_at_1,
        "folds_router_task_given": routing.task_given_hit_at_1,
        "folds_per_task_true_task": base.best_llm_per_task,
        "folds_per_task_task_from_text": base.best_llm_per_task_from_text,
        "folds_best_single": base.best_single_llm,
        "folds_oracle": base.oracle,
    }


def nearest_vote(
    pool_vectors: np.ndarray, pool_scores: np.ndarray, vectors: np.ndarray, k: int = NEAREST
) -> np.ndarray:
    """Each LLM's mean score on the `k` nearest pool questions (cosine) it was scored on, with
    one pseudo-question at its overall mean: the plain vote a P(correct) is held to."""
    unit = pool_vectors / np.linalg.norm(pool_vectors, axis=1, keepdims=True)
    asked = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    nearest = np.argsort(-(asked @ unit.T), axis=1)[:, :k]
    means = np.nanmean(pool_scores, axis=0)
    found = pool_scores[nearest]
    return (np.nansum(found, axis=1) + means) / ((~np.isnan(found)).sum(axis=1) + 1)


def folds_nearest_vote(store: Any, seed: int, folds: int = 5) -> float:
    """The log-loss of `nearest_vote` over `locus evaluate --folds`' folds (the same `seed`):
    each question voted on by the training and validation questions of its fold."""
    from locus.data.splits import kfold_splits
    from locus.metrics import log_loss
    from locus.pipeline import workspace_table

    data = workspace_table(store)
    scores = data.table.scores
    proba, truth = [], []
    for splits in kfold_splits(list(data.table.text_hashes), folds=folds, seed=seed):
        split = data.with_splits(splits)
        pool = np.concatenate([split.rows("train"), split.rows("val")])
        test = split.rows("test")
        proba.append(nearest_vote(data.vectors[pool], scores[pool], data.vectors[test]))
        truth.append(scores[test])
    return log_loss(np.concatenate(proba), np.concatenate(truth))


def without_tasks(records: pd.DataFrame, seed: int, folder: Path) -> dict[str, Any]:
    """The same pool without its `category` column (`--without-tasks`): `locus evaluate
    --folds 5`'s out-of-fold P(correct) beside the simple predictors evaluate sets it beside
    and the plain vote of each question's 20 nearest (`nearest_vote`); on 400 questions the
    pool never saw, the expected log-loss against the planted skills, the router's and that
    vote's over the pool's 200."""
    _, fresh, rows = draw(records, seed)
    for columns in rows.values():
        del columns["category"]
    with csv_pool_router(folder, rows) as router:
        landlord = router.route_texts([LANDLORD])[0].llm_id
        folds = evaluate_folds(router.store, folds=5, seed=seed)
        oof_vote = folds_nearest_vote(router.store, seed)
        from locus.pipeline import workspace_table

        data = workspace_table(router.store)
        texts, tasks = list(fresh["question"]), list(fresh["category"])
        vectors = router.vectors_for(texts)
        llms = list(data.table.llm_ids)
        columns = [list(router.router.llm_ids).index(llm) for llm in llms]
        proba = np.asarray(router.router.predict_proba(vectors), np.float64)[:, columns]
        vote = nearest_vote(data.vectors, data.table.scores, vectors)
    planted = np.array([[SKILL[llm][t] for llm in llms] for t in tasks])
    correct = folds.correctness
    assert correct.log_loss is not None
    return {
        "folds_router_log_loss": correct.log_loss,
        "folds_router_ece": correct.ece,
        "folds_router_auroc": correct.auroc,
        "folds_nearest_vote_log_loss": oof_vote,
        **{f"folds_{name}_log_loss": f.log_loss for name, f in correct.floors.items()},
        "folds_router_hit": folds.routing.hit_at_1,
        "folds_best_single": folds.baselines.best_single_llm,
        "folds_knn_hit": folds.baselines.knn,
        "folds_oracle": folds.baselines.oracle,
        "fresh_log_loss_router": expected_log_loss(proba, planted),
        "fresh_log_loss_nearest_vote": expected_log_loss(vote, planted),
        "fresh_log_loss_planted": expected_log_loss(planted, planted),
        "landlord": landlord,
    }


def draw(records: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(the pool's 200 questions, 400 fresh ones of the same tasks, the CSV columns of each
    LLM: its answers drawn from its planted skills)."""
    rng = np.random.default_rng(seed)
    picked = pd.concat(
        records[records["category"] == task].sample(50, random_state=seed + 1) for task in TASKS
    )
    others = records[
        records["category"].isin(TASKS) & ~records["question"].isin(picked["question"])
    ]
    fresh = pd.concat(
        others[others["category"] == task].sample(100, random_state=seed + 7) for task in TASKS
    )
    texts, tasks = list(picked["question"]), list(picked["category"])
    rows = {
        llm: {
            "model": llm,
            "prompt": texts,
            "category": tasks,
            "correct": [int(rng.random() < skill[t]) for t in tasks],
        }
        for llm, skill in SKILL.items()
    }
    return picked, fresh, rows


def one_seed(records: pd.DataFrame, seed: int, folder: Path) -> dict[str, Any]:
    picked, fresh, rows = draw(records, seed)
    texts, tasks = list(picked["question"]), list(picked["category"])
    with csv_pool_router(folder, rows) as router:
        vectors = router.vectors_for(texts)
        from_text = [d.llm_id for d in router.route_texts(texts, top=1)]
        told = [d.llm_id for d in router.route_texts(texts, top=1, tasks=tasks)]
        landlord = router.route_texts([LANDLORD])[0].llm_id
        calibration = fresh_calibration(router, fresh)
        folds = evaluate_folds(router.store, folds=5, seed=seed)
    best = {t: max(SKILL, key=lambda llm: SKILL[llm][t]) for t in TASKS}
    read = tasks_read_from_text(vectors, tasks)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    nearest = np.argsort(-similarity, axis=1)[:, :20]
    labels = np.asarray(tasks)
    majority = [pd.Series(labels[row]).value_counts().index[0] for row in nearest]
    return {
        "router_from_text": expected(from_text, tasks),
        "router_task_given": expected(told, tasks),
        "per_task_true_task": expected([best[t] for t in tasks], tasks),
        "per_task_task_from_text": expected([best[t] for t in read], tasks),
        "best_single": max(expected([llm] * len(tasks), tasks) for llm in SKILL),
        "task_read_by_centroid": float(np.mean([r == t for r, t in zip(read, tasks, strict=True)])),
        "task_read_by_20_nearest": float(np.mean(np.asarray(majority) == labels)),
        **calibration,
        **out_of_fold(folds),
        "landlord": landlord,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--without-tasks", action="store_true", help="the same pools without their category"
    )
    parser.add_argument("--tag", default="", help="suffix of the result's name")
    args = parser.parse_args()
    measure = without_tasks if args.without_tasks else one_seed
    archive = (
        require_shared_data()
        / "mmlu_pro"
        / "eval_results"
        / "model_outputs_Llama-2-7b-hf_5shots.zip"
    )
    with zipfile.ZipFile(archive) as opened:
        records = pd.read_json(opened.open(opened.namelist()[0]))
    runs = {}
    for seed in args.seeds:
        with tempfile.TemporaryDirectory(prefix="locus-small-pool-") as folder:
            runs[seed] = measure(records, seed, Path(folder))
        print(seed, runs[seed], flush=True)
    figures: dict[str, Any] = {"seeds": args.seeds}
    for key, value in runs[args.seeds[0]].items():
        if isinstance(value, float):
            values = [runs[s][key] for s in args.seeds]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            figures[key] = f"{statistics.mean(values):.4f} ± {sd:.4f}"
    figures["landlord"] = [runs[s]["landlord"] for s in args.seeds]
    figures["runs"] = runs
    name = "small-pool-without-tasks" if args.without_tasks else "small-pool"
    report(name + args.tag, figures)


if __name__ == "__main__":
    main()
