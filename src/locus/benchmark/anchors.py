"""The `anchors` suite: seen LLMs, unseen test queries, A scores of evidence per LLM.

For each seed and each evidence size A: every LLM keeps its scores on A training queries (by
default one shared random order, the first A each LLM was scored on: `locus.data.anchors`; or
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
from locus.benchmark.methods import METHODS, Fold, fit_method
from locus.data.anchors import choose_anchors
from locus.errors import LocusInputError
from locus.metrics import correctness_metrics, oracle_accuracy, routing_accuracy
from locus.pipeline import WorkspaceTable
from locus.routing import PerTaskRouter, Router

__all__ = ["DEFAULT_EVIDENCE", "evidence_fold", "fitted_test_proba", "run_anchors"]

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
    if size == "all":
        return {}
    return {"anchors": int(size), "min_evidence": min(16, int(size))}


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


def fitted_test_proba(
    method: str,
    fold: Fold,
    size: int | str,
    data: WorkspaceTable,
    *,
    locus_settings: dict[str, Any] | None = None,
    cache_dir: Path | None = None,
) -> tuple[np.ndarray, bool]:
    """(P(correct) on the test queries (n_test, n_llms), from the cache?) of `method` fitted
    on `fold`, whose evidence size is `size`. LOCUS at "all" embeds every LLM from all its
    training scores; the per-task router reads the test queries' true tasks."""
    router, cached = fit_method(
        method,
        fold,
        locus_settings={**_locus_settings(size), **(locus_settings or {})},
        cache_dir=cache_dir,
    )
    if method == "locus" and size == "all":
        _embed_from_all(router, fold)
    test = data.rows("test")
    if method == "per-task":
        assert isinstance(router, PerTaskRouter)
        return router.predict_proba_for_tasks([data.table.tasks[i] for i in test]), cached
    return np.asarray(router.predict_proba(data.vectors[test]), dtype=np.float64), cached


def run_anchors(
    data: WorkspaceTable,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    evidence: Sequence[int | str] = DEFAULT_EVIDENCE,
    methods: Sequence[str] = tuple(METHODS),
    cache_dir: Path | None = None,
    locus_settings: dict[str, Any] | None = None,
    draw: str = "shared",
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """Run the suite; a JSON-ready dict of per-seed values and mean ± sd per method and size.

    `draw`: "shared" (every LLM's A scores are on the same A queries, a common probe set: then
    every method trains on A queries in all) or "per-llm" (each LLM its own A random training
    queries, as in evaluation logs where LLMs were scored on different samples).

    Raises:
        LocusInputError: an unknown method or draw, a bad evidence size, or no test queries.
    """
    if draw not in DRAWS:
        raise LocusInputError(f"unknown draw {draw!r}; expected one of {', '.join(DRAWS)}")
    sizes = _parse_sizes(evidence)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise LocusInputError(
            f"unknown method {unknown[0]!r}; expected some of {', '.join(METHODS)}"
        )
    if "per-task" in methods and all(t is None for t in data.table.tasks):
        methods = [m for m in methods if m != "per-task"]
    test = data.rows("test")
    if len(test) == 0:
        raise LocusInputError("the anchors suite needs test queries; the split has none")
    truth = data.table.scores[test]
    oracle = oracle_accuracy(truth)
    started = time.perf_counter()
    per_seed: dict[str, dict[str, list[dict[str, float]]]] = {
        m: {str(s): [] for s in sizes} for m in methods
    }
    with progress("anchors suite: fitting", total=len(seeds) * len(sizes) * len(methods)) as step:
        for seed in seeds:
            for size in sizes:
                fold = evidence_fold(data, size, seed, draw)
                fitted: dict[str, tuple[np.ndarray, float, bool]] = {}
                for method in methods:
                    t = time.perf_counter()
                    proba, cached = fitted_test_proba(
                        method, fold, size, data, locus_settings=locus_settings,
                        cache_dir=cache_dir,
                    )  # fmt: skip
                    fitted[method] = (proba, time.perf_counter() - t, cached)
                    step(1)
                single = (
                    routing_accuracy(fitted["best-single"][0], truth)
                    if "best-single" in fitted
                    else float("nan")
                )
                for method, (proba, seconds, cached) in fitted.items():
                    hit = routing_accuracy(proba, truth)
                    quality = correctness_metrics(proba, truth)
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
                            "seconds": seconds,
                            "cached": cached,
                        }
                    )
    summary = {
        method: {
            size: {
                metric: mean_sd([run[metric] for run in runs])
                for metric in ("hit@1", "headroom", "accuracy", "auroc", "ece", "log_loss")
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
        "queries": {split: len(data.rows(split)) for split in ("train", "val", "test")},
        "encoder": data.encoder,
        "oracle": oracle,
        "per_seed": per_seed,
        "summary": summary,
        "wall_seconds": time.perf_counter() - started,
    }
