"""The `newcomers` suite: one LLM at a time left out of the fit, then onboarded from k of its
scores the way `locus onboard` does it. Does the router act on what those scores say?

For each newcomer (the pool's best LLM by its mean training score, its worst, named ones, and
some drawn at random), the router `locus fit` keeps (LOCUS stacked with the kNN votes, the
guard, the reading of a newcomer beside the pool: `StackedRouter`) is fitted on the other LLMs
(test scores hidden). Then, per k and seed, the newcomer is onboarded from k of its training
scores (the first k of the probe strategy's order, `locus.pipeline.probes`): its embedding
from them (one forward pass, no retraining) and its own votes joined (`StackedRouter.join`,
the guard's default re-chosen where its paired scores beat it), as the workspace router does
for an onboarded LLM. Measured on the test queries the newcomer was scored on:

- whole-pool hit@1 (guarded, each query among the LLMs scored on it), beside the router
  without the newcomer and the newcomer alone, and its share of the queries;
- its predicted accuracy (mean P(correct)) against its measured one, overall and per task,
  beside what its probes say (their mean, their per-task means);
- AUROC and log-loss of its P(correct), beside MF, IRT and kNN onboarded from the same k
  scores (their per-LLM part fitted on them, everything else frozen: `add_llm`);
- the same LLM trained in the pool (`in_pool`: the router fitted on every LLM, its training
  scores included): its P(correct)'s AUROC, log-loss and errors on the same queries, and the
  pool's hit@1 then, what onboarding from k scores is measured against.

One fit per newcomer and one of the whole pool (training seed 0, cached in `cache_dir` like
the other suites); the seeds draw the probes.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from locus._progress import ProgressFactory, no_progress
from locus.benchmark._stats import log_loss, mean_sd
from locus.benchmark.methods import Fold, cached, fit_method
from locus.errors import LocusInputError
from locus.metrics import correctness_metrics
from locus.pipeline import WorkspaceTable
from locus.routing import KNNRouter, LocusRouter, StackedRouter
from locus.routing.decision import RouteRequest, choose
from locus.routing.factors import MIN_STEPS, PATIENCE, READINGS, Factors

__all__ = [
    "NEWCOMER_BASELINES",
    "NEWCOMER_K",
    "choose_newcomers",
    "newcomer_probes",
    "pool_hit",
    "run_newcomers",
    "suite_router",
]

NEWCOMER_K: tuple[int, ...] = (16, 32, 64, 128)
NEWCOMER_BASELINES = ("mf", "irt", "knn")


def choose_newcomers(
    data: WorkspaceTable, named: Sequence[str] = ("best", "worst"), random: int = 5, seed: int = 0
) -> list[str]:
    """The LLMs to play the newcomer: each of `named` ("best" / "worst": the highest / lowest
    mean training score; else an llm_id), then `random` others drawn with `seed`.

    Raises:
        LocusInputError: an unknown LLM, or a pool of fewer than three LLMs.
    """
    ids = list(data.table.llm_ids)
    if len(ids) < 3:
        raise LocusInputError("the newcomers suite needs at least three LLMs (two stay)")
    means = np.nanmean(data.table.scores[data.rows("train")], axis=0)
    order = [ids[i] for i in np.argsort(-np.nan_to_num(means, nan=-1.0), kind="stable")]
    chosen: list[str] = []
    for name in named:
        llm = {"best": order[0], "worst": order[-1]}.get(name, name)
        if llm not in ids:
            data.table.llm_index(llm)  # raises, naming the LLMs it knows
        if llm not in chosen:
            chosen.append(llm)
    rest = [llm for llm in ids if llm not in chosen]
    drawn = np.random.default_rng([seed, 5]).permutation(len(rest))[: max(0, random)]
    return chosen + [rest[i] for i in sorted(drawn)]


def newcomer_probes(
    data: WorkspaceTable, known: list[int], column: int, k: int, seed: int, strategy: str
) -> np.ndarray:
    """The newcomer's k probe rows: the first k training queries it was scored on in the
    strategy's order (read from the other LLMs' scores)."""
    from locus.pipeline.probes import first_scored, probe_order

    train = data.rows("train")
    order = probe_order(data.table.scores[:, known], data.vectors, train, strategy, seed=seed,
                        tasks=data.table.tasks)  # fmt: skip
    return np.sort(first_scored(order, ~np.isnan(data.table.scores[:, column]), k))


def pool_hit(
    router: StackedRouter, vectors: np.ndarray, truth: np.ndarray, ids: list[str]
) -> tuple[float, float, np.ndarray]:
    """(hit@1 of the guarded routing, the last LLM's share, the P(correct) (n, len(ids))):
    each query among the LLMs of `ids` scored on it (`truth` NaN: not scored)."""
    columns = [list(router.llm_ids).index(llm) for llm in ids]
    proba = np.asarray(router.predict_proba(vectors), np.float64)[:, columns]
    guard = router.guard
    bound = (ids.index(guard.default), guard.margin) if guard and guard.default in ids else None
    choice = choose(proba, None, RouteRequest(), allowed=~np.isnan(truth), guard=bound)
    kept = np.flatnonzero(choice >= 0)
    hit = float(np.mean(truth[kept, choice[kept]]))
    return hit, float(np.mean(choice == len(ids) - 1)), proba


def _per_task_error(predicted: np.ndarray, truth: np.ndarray, tasks: list[str]) -> float:
    """Mean over the tasks of |mean predicted - measured accuracy| on its queries."""
    labels = np.asarray(tasks, dtype=object)
    return float(np.mean([abs(predicted[labels == t].mean() - truth[labels == t].mean())
                          for t in sorted(set(tasks))]))  # fmt: skip


def _quality(proba: np.ndarray, truth: np.ndarray, tasks: list[str]) -> dict[str, float]:
    return {
        "auroc": correctness_metrics(proba[:, None], truth[:, None])["auroc"],
        "log_loss": log_loss(proba, truth),
        "accuracy_error": abs(float(proba.mean()) - float(truth.mean())),
        "per_task_error": _per_task_error(proba, truth, tasks),
    }


def run_newcomers(
    data: WorkspaceTable,
    *,
    newcomers: Sequence[str] = ("best", "worst"),
    random: int = 5,
    ks: Sequence[int] = NEWCOMER_K,
    seeds: Sequence[int] = (0, 1, 2),
    strategy: str = "random",
    baselines: Sequence[str] = NEWCOMER_BASELINES,
    cache_dir: Path | None = None,
    locus_settings: dict[str, Any] | None = None,
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """Run the suite (the module says what it measures); a JSON-ready dict of per-run values
    and, per newcomer and k, mean ± sd over the seeds.

    Raises:
        LocusInputError: bad k, no seed, an unknown strategy, baseline or LLM, no test query.
    """
    from locus.pipeline.probes import STRATEGIES

    if not seeds or any(int(k) < 1 for k in ks) or not ks:
        raise LocusInputError("the newcomers suite needs a seed and every k at least 1 score")
    if strategy not in STRATEGIES:
        raise LocusInputError(
            f"probe strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}"
        )
    strange = [b for b in baselines if b not in NEWCOMER_BASELINES]
    if strange:
        raise LocusInputError(
            f"baseline {strange[0]!r} cannot onboard here; expected some of "
            f"{', '.join(NEWCOMER_BASELINES)}"
        )
    if len(data.rows("test")) == 0:
        raise LocusInputError("the newcomers suite needs test queries; the split has none")
    chosen = choose_newcomers(data, newcomers, random)
    ids = list(data.table.llm_ids)
    train, val, test = data.rows("train"), data.rows("val"), data.rows("test")
    hidden = data.table.scores.copy()
    hidden[test] = np.nan
    started = time.perf_counter()
    whole = Fold(replace(data.table, scores=hidden), data.vectors, train, val, data.encoder, 0,
                 "the whole pool")  # fmt: skip
    in_pool, _ = suite_router(whole, locus_settings, cache_dir)
    runs: list[dict[str, Any]] = []
    with progress("newcomers suite", total=len(chosen) + 1) as step:
        step(1)
        for newcomer in chosen:
            column = ids.index(newcomer)
            known = [c for c in range(len(ids)) if c != column]
            pool_ids = [ids[c] for c in known]
            table = replace(data.table, scores=hidden).select_llms(pool_ids)
            fold = Fold(table, data.vectors, train, val, data.encoder, 0, f"without {newcomer}")
            base, knn = suite_router(fold, locus_settings, cache_dir)
            fitted = {  # each copied before the newcomer joins it: the stack's kNN part too
                b: knn if b == "knn" else fit_method(b, fold, cache_dir=cache_dir)[0]
                for b in baselines
            }
            rows = test[~np.isnan(data.table.scores[test, column])]
            truth = data.table.scores[rows][:, [*known, column]]
            vectors = data.vectors[rows]
            tasks = ["" if data.table.tasks[i] is None else str(data.table.tasks[i]) for i in rows]
            without, _, _ = pool_hit(base, vectors, truth[:, :-1], pool_ids)
            trained_hit, _, trained = pool_hit(in_pool, vectors, truth, [*pool_ids, newcomer])
            trained_in = {"hit@1": trained_hit, **_quality(trained[:, -1], truth[:, -1], tasks)}
            default = base.guard.default if base.guard is not None else None
            for k in ks:
                for seed in seeds:
                    probes = newcomer_probes(data, known, column, int(k), seed, strategy)
                    scores = data.table.scores[probes, column]
                    probe_tasks = ["" if data.table.tasks[i] is None else str(data.table.tasks[i])
                                   for i in probes]  # fmt: skip
                    router = copy.deepcopy(base)
                    router.locus.model.add_llm(newcomer, data.vectors[probes], scores)  # type: ignore[attr-defined]
                    paired = (
                        None if default is None else data.table.scores[probes, ids.index(default)]
                    )
                    router.join(newcomer, data.vectors[probes], scores, probe_tasks,
                                default_scores=paired)  # fmt: skip
                    hit, share, proba = pool_hit(router, vectors, truth, [*pool_ids, newcomer])
                    by_task = {t: float(scores[np.asarray(probe_tasks) == t].mean())
                               for t in set(probe_tasks)}  # fmt: skip
                    guess = np.array([by_task.get(t, float(scores.mean())) for t in tasks])
                    onboarded = {}
                    for name, baseline in fitted.items():
                        copied = copy.deepcopy(baseline)
                        copied.add_llm(newcomer, data.vectors[probes], scores)  # type: ignore[attr-defined]
                        p = np.asarray(copied.predict_proba(vectors), np.float64)[:, -1]
                        onboarded[name] = _quality(p, truth[:, -1], tasks)
                    runs.append({
                        "newcomer": newcomer, "k": int(k), "seed": int(seed),
                        "without": without, "alone": float(np.mean(truth[:, -1])),
                        "hit@1": hit, "gain": hit - without, "share": share,
                        "probes_mean": float(scores.mean()),
                        "measured_accuracy": float(np.mean(truth[:, -1])),
                        "predicted_accuracy": float(proba[:, -1].mean()),
                        "probes_error": abs(float(scores.mean()) - float(np.mean(truth[:, -1]))),
                        "probes_per_task_error": _per_task_error(guess, truth[:, -1], tasks),
                        "default": None if router.guard is None else router.guard.default,
                        "locus": _quality(proba[:, -1], truth[:, -1], tasks),
                        "baselines": onboarded,
                        "in_pool": trained_in,
                    })  # fmt: skip
            step(1)
    return {
        "suite": "newcomers",
        "newcomers": chosen,
        "k": [int(k) for k in ks],
        "seeds": [int(s) for s in seeds],
        "strategy": strategy,
        "baselines": list(baselines),
        "llms": len(ids),
        "queries": {s: len(data.rows(s)) for s in ("train", "val", "test")},
        "encoder": data.encoder,
        "runs": runs,
        "summary": _summary(runs, chosen, [int(k) for k in ks], list(baselines)),
        "wall_seconds": time.perf_counter() - started,
    }


def suite_router(
    fold: Fold, locus_settings: dict[str, Any] | None, cache_dir: Path | None
) -> tuple[StackedRouter, KNNRouter]:
    """(the router `locus fit` keeps, fitted on `fold`; its kNN part) (LOCUS, kNN and the
    factor model cached)."""
    locus, _ = fit_method("locus", fold, locus_settings=locus_settings, cache_dir=cache_dir)
    knn, _ = fit_method("knn", fold, cache_dir=cache_dir)
    assert isinstance(locus, LocusRouter) and isinstance(knn, KNNRouter)
    train, val = fold.evidence("train"), fold.evidence("val")
    # keyed by what the models are fitted with: other settings are other models
    settings = {"readings": READINGS, "min_steps": MIN_STEPS, "patience": PATIENCE}
    folder = None if cache_dir is None else cache_dir / "factors" / fold.key("factors", settings)
    factors, _ = cached(folder, Factors.load, lambda: Factors.fit(train, val), Factors.save)
    return StackedRouter.fit(locus, train, val, knn=knn, factors=factors), knn


def _summary(
    runs: list[dict[str, Any]], newcomers: list[str], ks: list[int], baselines: list[str]
) -> dict[str, Any]:
    """Per newcomer and k (and "mean" over the newcomers, per k): mean ± sd over seeds."""
    plain = ("hit@1", "gain", "share", "without", "alone", "probes_error", "probes_per_task_error")
    quality = ("auroc", "log_loss", "accuracy_error", "per_task_error")
    out: dict[str, Any] = {}
    for who in [*newcomers, "mean"]:
        out[who] = {}
        for k in ks:
            mine = [r for r in runs if r["k"] == k and who in ("mean", r["newcomer"])]
            entry: dict[str, Any] = {m: mean_sd([r[m] for r in mine]) for m in plain}
            entry["locus"] = {m: mean_sd([r["locus"][m] for r in mine]) for m in quality}
            for b in baselines:
                entry[b] = {m: mean_sd([r["baselines"][b][m] for r in mine]) for m in quality}
            entry["in_pool"] = {m: mean_sd([r["in_pool"][m] for r in mine])
                                for m in ("hit@1", *quality)}  # fmt: skip
            out[who][str(k)] = entry
    return out
