"""The `anchors` suite: seen LLMs, unseen test queries, A scores of evidence per LLM.

For each seed and each evidence size A: every LLM keeps its scores on A training queries (by
default one shared random order, the first A each LLM was scored on: `locus.data.anchor_choice`; or
with `draw="per-llm"` each LLM its own random A), every method is
fitted on exactly those cells (validation queries in full, for early stopping and choices), and
is scored on the test queries of the hash split: routing hit@1, headroom captured
((hit@1 - best single) / (oracle - best single), the best single LLM chosen from the same
evidence), and correctness accuracy, AUROC and ECE over every test cell.

"all" keeps every training score; LOCUS then trains with its default anchors and embeds each
LLM from all its training scores (chunked), which is what a workspace's `locus embed --all`
does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from locus._progress import ProgressFactory, no_progress
from locus.benchmark._stats import log_loss, mean_sd
from locus.benchmark.methods import (
    COMBINED,
    METHODS,
    SLOW_METHODS,
    Fold,
    cache_key,
    fit_in_parallel,
    fit_method,
)
from locus.calibration import sigmoid
from locus.data.anchor_choice import choose_anchors
from locus.errors import LocusInputError
from locus.metrics import (
    best_single_accuracy,
    correctness_metrics,
    oracle_accuracy,
    routing_accuracy,
    routing_choices,
)
from locus.pipeline import WorkspaceTable
from locus.ray_cluster import RaySession
from locus.routing import KNNRouter, LocusRouter, PerTaskRouter, Router, StackedRouter
from locus.routing.decision import RouteRequest, choose
from locus.routing.guard import fit_default_guard

__all__ = ["DEFAULT_EVIDENCE", "evidence_fold", "fitted_proba", "run_anchors"]

DEFAULT_EVIDENCE: tuple[int | str, ...] = (16, 32, 64, 128, 256, 512, 1024, "all")


def _parse_sizes(sizes: Sequence[int | str]) -> list[int | str]:
    parsed: list[int | str] = []
    for size in sizes:
        if isinstance(size, str) and size.strip().lower() == "all":
            parsed.append("all")
            continue
        try:
            value = int(size)
        except (TypeError, ValueError):
            raise LocusInputError(
                f"evidence size {size!r}: expected a whole number of scores or 'all'"
            ) from None
        if value < 1:
            raise LocusInputError(f"evidence size {value}: must be at least 1")
        parsed.append(value)
    return parsed


DRAWS = ("shared", "per-llm")
SUMMARISED = ("hit@1", "headroom", "guarded_hit@1", "guarded_headroom", "moved", "accuracy",
              "auroc", "ece", "log_loss", "uncalibrated_ece", "uncalibrated_log_loss")  # fmt: skip


def evidence_fold(data: WorkspaceTable, size: int | str, seed: int, draw: str = "shared") -> Fold:
    """The fold of one seed and evidence size: training rows keep A scores per LLM (drawn
    `shared` or `per-llm`), validation rows all theirs, test rows none."""
    train, val, test = data.rows("train"), data.rows("val"), data.rows("test")
    scores = data.table.scores.copy()
    scores[test] = np.nan  # nothing a fit reads can leak the test truth
    if size != "all":
        observed = ~np.isnan(scores)
        if draw == "shared":
            anchors = choose_anchors(observed, train, int(size), np.random.default_rng(seed))
        else:  # each LLM its own random queries: the union of training queries stays large
            anchors = [
                choose_anchors(
                    observed[:, [c]], train, int(size), np.random.default_rng([seed, c])
                )[0]
                for c in range(observed.shape[1])
            ]
        keep = np.zeros_like(observed)
        keep[val] = observed[val]
        for column, rows in enumerate(anchors):
            keep[rows, column] = True
        scores = np.where(keep, scores, np.nan)
    label = f"seed {seed}, {size} scores per LLM ({draw})"
    return Fold(
        replace(data.table, scores=scores), data.vectors, train, val, data.encoder, seed, label
    )


def _locus_settings(size: int | str) -> dict[str, Any]:
    # the suite's protocol trains every evidence size for the same schedule (`locus fit` would
    # shorten it where A scores per LLM are few cells: `TrainingConfig.max_passes`)
    if size == "all":
        return {"max_passes": None}
    return {"anchors": int(size), "min_evidence": min(16, int(size)), "max_passes": None}


def _embed_from_all(router: Router, fold: Fold) -> None:
    """LOCUS at "all": every LLM re-embedded from all its training scores."""
    model = router.model  # type: ignore[attr-defined]
    scores = fold.table.scores
    evidence = []
    for column in range(fold.table.n_llms):
        rows = fold.train_rows[~np.isnan(scores[fold.train_rows, column])]
        evidence.append((fold.vectors[rows], scores[rows, column]))
    counts = [len(s) for _, s in evidence]
    model.set_embeddings(list(fold.table.llm_ids), model.embed_many(evidence), counts)


def fitted_proba(
    method: str,
    fold: Fold,
    size: int | str,
    data: WorkspaceTable,
    *,
    splits: Sequence[str] = ("test",),
    locus_settings: dict[str, Any] | None = None,
    cache_dir: Path | None = None,
) -> tuple[dict[str, np.ndarray], bool]:
    """({split: P(correct) (n_split, n_llms)} for each of `splits`, from the cache?) of
    `method` fitted on `fold`, whose evidence size is `size`. LOCUS at "all" embeds every LLM
    from all its training scores; the per-task router reads the queries' true tasks; a
    combined method mixes its parts' predictions with the weight chosen on validation."""
    if method in COMBINED:  # locus+knn: the stacked router `locus fit` keeps
        stacked, cached = _stacked_router(fold, size, locus_settings, cache_dir)
        return {
            split: np.asarray(stacked.predict_proba(data.vectors[data.rows(split)]), np.float64)
            for split in splits
        }, cached
    router, cached = fit_method(
        method,
        fold,
        locus_settings={**_locus_settings(size), **(locus_settings or {})},
        cache_dir=cache_dir,
    )
    if method == "locus" and size == "all":
        _embed_from_all(router, fold)
    out = {}
    for split in splits:
        rows = data.rows(split)
        if method == "per-task":
            assert isinstance(router, PerTaskRouter)
            proba = router.predict_proba_for_tasks([data.table.tasks[i] for i in rows])
        else:
            proba = router.predict_proba(data.vectors[rows])
        out[split] = np.asarray(proba, dtype=np.float64)
        if method == "locus":  # the predictor's own P(correct), before calibration
            logits = router.model.predict_logits(data.vectors[rows], calibrated=False)  # type: ignore[attr-defined]
            out[f"{split}_uncalibrated"] = sigmoid(logits)
    return out, cached


def _stacked_router(
    fold: Fold,
    size: int | str,
    locus_settings: dict[str, Any] | None,
    cache_dir: Path | None,
) -> tuple[StackedRouter, bool]:
    """(the `StackedRouter` fitted on `fold` exactly as `locus fit` fits it, from the cache?):
    LOCUS and the kNN router from the method cache, the stack and guard on the fold's training
    evidence and validation queries."""
    locus, cached = fit_method(
        "locus",
        fold,
        locus_settings={**_locus_settings(size), **(locus_settings or {})},
        cache_dir=cache_dir,
    )
    if size == "all":
        _embed_from_all(locus, fold)
    knn, _ = fit_method("knn", fold, cache_dir=cache_dir)
    assert isinstance(locus, LocusRouter) and isinstance(knn, KNNRouter)
    router = StackedRouter.fit(locus, fold.evidence("train"), fold.evidence("val"), knn=knn)
    return router, cached


def _uncalibrated(proba: dict[str, np.ndarray], truth: np.ndarray) -> dict[str, float]:
    """ECE and log-loss of LOCUS's P(correct) before calibration; {} for the others."""
    raw = proba.get("test_uncalibrated")
    if raw is None:
        return {}
    return {
        "uncalibrated_ece": correctness_metrics(raw, truth)["ece"],
        "uncalibrated_log_loss": log_loss(raw, truth),
    }


def _guarded(
    proba: dict[str, np.ndarray], fold: Fold, pool: WorkspaceTable, truth: np.ndarray
) -> tuple[float, float | None, float]:
    """(test hit@1, margin (None: always the default), share of test queries moved) of the
    guard chosen on validation, the default the best LLM on the fold's training evidence:
    `locus.routing.guard`."""
    ids = list(fold.table.llm_ids)
    guard = fit_default_guard(
        proba["val"], fold.table.scores[fold.train_rows], pool.table.scores[pool.rows("val")], ids
    )
    if guard is None:  # too few validation queries to choose a margin: unguarded
        default, _ = best_single_accuracy(fold.table.scores[fold.train_rows], truth)
        moved = float(np.mean(routing_choices(proba["test"], truth) != default))
        return routing_accuracy(proba["test"], truth), 0.0, moved
    default = ids.index(guard.default)
    evaluated = ~np.isnan(truth)
    choice = choose(
        proba["test"], None, RouteRequest(), allowed=evaluated, guard=(default, guard.margin)
    )
    moved = float(np.mean(choice != default))
    rows = np.flatnonzero(choice >= 0)
    return float(np.mean(truth[rows, choice[rows]])), guard.as_dict()["margin"], moved


def run_anchors(
    data: WorkspaceTable,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    evidence: Sequence[int | str] = DEFAULT_EVIDENCE,
    methods: Sequence[str] = tuple(METHODS),
    cache_dir: Path | None = None,
    locus_settings: dict[str, Any] | None = None,
    draw: str = "shared",
    queries: int | None = None,
    workers: int = 1,
    ray: RaySession | None = None,
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """Run the suite; a JSON-ready dict of per-seed values and mean ± sd per method and size.

    `draw`: "shared" (every LLM's A scores are on the same A queries, a common probe set: then
    every method trains on A queries in all) or "per-llm" (each LLM its own A random training
    queries, as in evaluation logs where LLMs were scored on different samples).
    `queries`: run each seed on its own random subsample of that many queries
    (`WorkspaceTable.subsample`), a small pool drawn from a large one.
    `workers` > 1 (with a `cache_dir`): the slow fits run first on that many one-thread
    processes (`fit_in_parallel`); the figures move only by floating-point order (a one-thread
    LOCUS fit sums in another order), the wall time by 1.5-2.2x on 2 cores. `ray` (an open
    `ray_session`, with a `cache_dir`): the slow fits run first as Ray tasks instead, with
    the figures of `workers` > 1.

    Raises:
        LocusInputError: an unknown method or draw, a bad evidence size, or no test queries.
    """
    if draw not in DRAWS:
        raise LocusInputError(f"unknown draw {draw!r}; expected one of {', '.join(DRAWS)}")
    if not seeds:
        raise LocusInputError("a suite needs at least one seed")
    sizes = _parse_sizes(evidence)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise LocusInputError(
            f"unknown method {unknown[0]!r}; expected some of {', '.join(METHODS)}"
        )
    if "per-task" in methods and all(t is None for t in data.table.tasks):
        methods = [m for m in methods if m != "per-task"]
    if len(data.rows("test")) == 0:
        raise LocusInputError("the anchors suite needs test queries; the split has none")
    if ray is not None and cache_dir is None:
        raise LocusInputError("fitting on Ray needs a cache_dir the fits come back into")
    started = time.perf_counter()
    per_seed: dict[str, dict[str, list[dict[str, float | None]]]] = {
        m: {str(s): [] for s in sizes} for m in methods
    }
    oracles: list[float] = []
    pools = {seed: data if queries is None else data.subsample(queries, seed) for seed in seeds}
    settings_of = {size: {**_locus_settings(size), **(locus_settings or {})} for size in sizes}
    fit_seconds: dict[str, float] = {}
    if (workers > 1 or ray is not None) and cache_dir is not None:
        jobs = [
            (method, evidence_fold(pools[seed], size, seed, draw), settings_of[size])
            for size in reversed(sizes)  # the largest evidence trains longest: first
            for method in methods
            if method in SLOW_METHODS
            for seed in seeds
        ]
        fit_seconds = fit_in_parallel(jobs, cache_dir, workers=workers, progress=progress, ray=ray)
    with progress("anchors suite: fitting", total=len(seeds) * len(sizes) * len(methods)) as step:
        for seed in seeds:
            pool = pools[seed]
            truth = pool.table.scores[pool.rows("test")]
            oracle = oracle_accuracy(truth)
            oracles.append(oracle)
            for size in sizes:
                fold = evidence_fold(pool, size, seed, draw)
                fitted: dict[str, tuple[dict[str, np.ndarray], float, bool]] = {}
                for method in methods:
                    t = time.perf_counter()
                    predicted, cached = fitted_proba(
                        method, fold, size, pool, splits=("val", "test"),
                        locus_settings=locus_settings, cache_dir=cache_dir,
                    )  # fmt: skip
                    seconds = time.perf_counter() - t
                    key = cache_key(method, fold, settings_of[size])
                    if key in fit_seconds:  # fitted by a worker just now
                        seconds, cached = fit_seconds[key], False
                    fitted[method] = (predicted, seconds, cached)
                    step(1)
                single = (
                    routing_accuracy(fitted["best-single"][0]["test"], truth)
                    if "best-single" in fitted
                    else float("nan")
                )
                for method, (both, seconds, cached) in fitted.items():
                    proba = both["test"]
                    hit = routing_accuracy(proba, truth)
                    quality = correctness_metrics(proba, truth)
                    guarded_hit, margin, moved = _guarded(both, fold, pool, truth)
                    per_seed[method][str(size)].append(
                        {
                            "seed": seed,
                            "hit@1": hit,
                            "headroom": (hit - single) / (oracle - single)
                            if oracle > single
                            else float("nan"),
                            "accuracy": quality["accuracy"],
                            "auroc": quality["auroc"],
                            "ece": quality["ece"],
                            "log_loss": log_loss(proba, truth),
                            **_uncalibrated(both, truth),
                            "guarded_hit@1": guarded_hit,
                            "guarded_headroom": (guarded_hit - single) / (oracle - single)
                            if oracle > single
                            else float("nan"),
                            "guard_margin": margin,
                            "moved": moved,
                            "oracle": oracle,
                            "seconds": seconds,
                            "cached": cached,
                        }
                    )
    summary = {
        method: {
            size: {
                metric: mean_sd([run.get(metric) for run in runs])
                for metric in SUMMARISED
                if any(metric in run for run in runs)
            }
            for size, runs in by_size.items()
        }
        for method, by_size in per_seed.items()
    }
    return {
        "suite": "anchors",
        "draw": draw,
        "seeds": list(seeds),
        "evidence": [str(s) for s in sizes],
        "methods": list(methods),
        "llms": data.table.n_llms,
        "queries": {split: len(pool.rows(split)) for split in ("train", "val", "test")},
        "subsample": queries,
        "encoder": data.encoder,
        "oracle": float(np.mean(oracles)),
        "per_seed": per_seed,
        "summary": summary,
        "wall_seconds": time.perf_counter() - started,
    }
