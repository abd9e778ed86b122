"""The `onboarding` suite: LLMs held out of training entirely, onboarded from k of their scores.

Per seed, whole families are held out (an LLM's fine-tunes and size siblings together: a random
split of LLMs lets near-duplicates leak) until about `holdout_share` of the pool is out. Every
method is fitted on the other LLMs only (the same fold for all), then each held-out LLM is
onboarded from its scores on k training queries (the first k it was scored on in the probe
order of each `strategies` entry, `locus.pipeline.probes`: "random", a shared random order, as
before; "informative", chosen from the known LLMs' scores only), nothing else refitted: LOCUS
embeds it in one forward pass, kNN and the cluster router use its k scores directly, MF and IRT
fit only its own vector. Measured on the test
queries: correctness of the held-out LLMs (AUROC, accuracy, log-loss, ECE over their test
cells) and routing hit@1 over the whole pool, next to the same LLMs onboarded from all their
training scores ("all").

Families come from the caller (`families`: llm_id -> family) or from the name
(`family_of`: the known LLM family named in it, else its first word).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from locus._progress import ProgressFactory, no_progress
from locus.benchmark._stats import log_loss, mean_sd
from locus.benchmark.methods import Fold, fit_method
from locus.data.families import family_of
from locus.errors import LocusInputError
from locus.metrics import correctness_metrics, routing_accuracy
from locus.pipeline import WorkspaceTable
from locus.routing import Router

__all__ = ["DEFAULT_K", "ONBOARDING_METHODS", "family_of", "run_onboarding"]

DEFAULT_K: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
ONBOARDING_METHODS = ("locus", "knn", "cluster", "mf", "irt", "best-single")


def _held_out(
    llm_ids: Sequence[str], families: Mapping[str, str], share: float, seed: int
) -> list[str]:
    groups: dict[str, list[str]] = {}
    for llm in llm_ids:
        groups.setdefault(families[llm], []).append(llm)
    order = sorted(groups)
    np.random.default_rng(seed).shuffle(order)
    target = max(1, round(share * len(llm_ids)))
    ceiling = max(target + 1, math.ceil(1.5 * target))
    out: list[str] = []
    for family in order:
        if len(out) >= target:
            break
        if len(llm_ids) - len(out) - len(groups[family]) < 2:
            continue  # keep at least two LLMs to train on
        if out and len(out) + len(groups[family]) > ceiling:
            continue  # a large family would hold out far more than asked: try the next
        out.extend(groups[family])
    if not out:
        raise LocusInputError(
            "onboarding: no family can be held out with two LLMs left to train on"
        )
    return out


def _evidence_rows(
    observed: np.ndarray, order: np.ndarray, column: int, count: int | None
) -> np.ndarray:
    rows = order[observed[order, column]]
    return rows if count is None else rows[:count]


def _probe_order(
    strategy: str, pool: WorkspaceTable, known: list[int], train: np.ndarray, seed: int
) -> np.ndarray:
    """The training rows in `strategy`'s probe order, from the known LLMs' scores alone."""
    if strategy == "random":  # the suite's order before strategies existed
        return train[np.random.default_rng([seed, 7]).permutation(len(train))]
    from locus.pipeline.probes import probe_order

    scores = pool.table.scores[:, known]
    return probe_order(scores, pool.vectors, train, strategy, seed=seed, tasks=pool.table.tasks)


def _onboarded(
    router: Router,
    data: WorkspaceTable,
    held: list[int],
    evidence: dict[int, np.ndarray],
    base_pool: tuple[list[str], np.ndarray, list[int], list[float | None]] | None,
) -> Router:
    """`router` with every held-out LLM onboarded from its evidence rows: LOCUS's pool is
    reset to `base_pool` (the fit's LLMs) plus the new embeddings, each with its evidence's
    mean score (as `locus embed` keeps it); a baseline is copied."""
    vectors, scores = data.vectors, data.table.scores
    if base_pool is not None:
        model = router.model  # type: ignore[attr-defined]
        ids, embeddings, counts, means = base_pool
        new = model.embed_many([(vectors[evidence[c]], scores[evidence[c], c]) for c in held])
        model.set_embeddings(
            ids + [data.table.llm_ids[c] for c in held],
            np.vstack([embeddings, new]),
            counts + [len(evidence[c]) for c in held],
            means + [float(np.mean(scores[evidence[c], c])) for c in held],
        )
        return router
    copied = copy.deepcopy(router)
    for column in held:
        rows = evidence[column]
        copied.add_llm(data.table.llm_ids[column], vectors[rows], scores[rows, column])  # type: ignore[attr-defined]
    return copied


def run_onboarding(
    data: WorkspaceTable,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    ks: Sequence[int] = DEFAULT_K,
    methods: Sequence[str] = ONBOARDING_METHODS,
    holdout_share: float = 0.2,
    families: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
    locus_settings: dict[str, Any] | None = None,
    queries: int | None = None,
    strategies: Sequence[str] = ("random",),
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """Run the suite; a JSON-ready dict of per-seed values and mean ± sd per method and k.

    `queries`: run each seed on its own random subsample of that many queries
    (`WorkspaceTable.subsample`). `strategies`: probe orders to onboard from; results of a
    strategy other than "random" are keyed `<method>@<strategy>`.

    Raises:
        LocusInputError: a method that cannot onboard, bad k, or nothing to hold out.
    """
    unknown = [m for m in methods if m not in ONBOARDING_METHODS]
    if unknown:
        raise LocusInputError(
            f"method {unknown[0]!r} cannot onboard LLMs; expected some of "
            f"{', '.join(ONBOARDING_METHODS)}"
        )
    if not seeds:
        raise LocusInputError("a suite needs at least one seed")
    from locus.pipeline.probes import STRATEGIES

    strange = [s for s in strategies if s not in STRATEGIES]
    if strange or not strategies:
        raise LocusInputError(
            f"probe strategy {strange[0] if strange else None!r}: expected some of "
            f"{', '.join(STRATEGIES)}"
        )
    if any(int(k) < 1 for k in ks):
        raise LocusInputError("onboarding: every k must be at least 1 score")
    llm_ids = list(data.table.llm_ids)
    named = {llm: (families or {}).get(llm) or family_of(llm) for llm in llm_ids}
    if len(data.rows("test")) == 0:
        raise LocusInputError("the onboarding suite needs test queries; the split has none")
    sizes: list[int | None] = [int(k) for k in ks] + [None]
    labels = [str(k) for k in ks] + ["all"]
    started = time.perf_counter()
    keyed = [(m, s, m if s == "random" else f"{m}@{s}") for m in methods for s in strategies]
    per_seed: dict[str, dict[str, list[dict[str, Any]]]] = {
        key: {label: [] for label in labels} for _, _, key in keyed
    }
    held_out_by_seed: dict[str, list[str]] = {}
    with progress("onboarding suite", total=len(seeds) * len(methods)) as step:
        for seed in seeds:
            pool = data if queries is None else data.subsample(queries, seed)
            train, val, test = pool.rows("train"), pool.rows("val"), pool.rows("test")
            truth = pool.table.scores[test]
            observed = ~np.isnan(pool.table.scores)
            held_names = _held_out(llm_ids, named, holdout_share, seed)
            held_out_by_seed[str(seed)] = held_names
            held = [llm_ids.index(name) for name in held_names]
            known = [c for c in range(len(llm_ids)) if c not in held]
            scores = pool.table.scores.copy()
            scores[test] = np.nan
            table = replace(pool.table, scores=scores).select_llms([llm_ids[c] for c in known])
            fold = Fold(table, pool.vectors, train, val, pool.encoder, seed,
                        f"seed {seed}, {len(held)} LLMs held out")  # fmt: skip
            orders = {s: _probe_order(s, pool, known, train, seed) for s in strategies}
            evidence = {
                s: {
                    size: {c: _evidence_rows(observed, orders[s], c, size) for c in held}
                    for size in sizes
                }
                for s in strategies
            }
            for method in methods:
                router, cached = fit_method(
                    method, fold, locus_settings=locus_settings, cache_dir=cache_dir
                )
                base_pool = None
                if method == "locus":
                    model = router.model  # type: ignore[attr-defined]
                    known = model.pool_.evidence_means
                    base_pool = (list(model.llm_ids_), model.llm_embeddings_.copy(),
                                 [int(n) for n in model.evidence_counts_],
                                 [known.get(i, (None, 0))[0] for i in model.llm_ids_])  # fmt: skip
                for (_, strategy, key), size_label in (
                    ((m, s, k), pair)
                    for m, s, k in keyed
                    if m == method
                    for pair in zip(sizes, labels, strict=True)
                ):
                    size, label = size_label
                    t = time.perf_counter()
                    chosen = evidence[strategy][size]
                    onboarded = _onboarded(router, pool, held, chosen, base_pool)
                    order = [list(onboarded.llm_ids).index(name) for name in llm_ids]
                    proba = np.asarray(onboarded.predict_proba(pool.vectors[test]))[:, order]
                    quality = correctness_metrics(proba[:, held], truth[:, held])
                    per_seed[key][label].append(
                        {
                            "seed": seed,
                            "hit@1": routing_accuracy(proba, truth),
                            "held_out_auroc": quality["auroc"],
                            "held_out_accuracy": quality["accuracy"],
                            "held_out_ece": quality["ece"],
                            "held_out_log_loss": log_loss(proba[:, held], truth[:, held]),
                            "onboard_seconds": time.perf_counter() - t,
                            "cached_fit": cached,
                        }
                    )
                step(1)
    metrics = ("hit@1", "held_out_auroc", "held_out_accuracy", "held_out_ece",
               "held_out_log_loss")  # fmt: skip
    summary = {
        method: {
            label: {metric: mean_sd([run[metric] for run in runs]) for metric in metrics}
            for label, runs in by_k.items()
        }
        for method, by_k in per_seed.items()
    }
    return {
        "suite": "onboarding",
        "seeds": list(seeds),
        "k": labels,
        "methods": [key for _, _, key in keyed],  # <method>@<strategy> beyond random
        "strategies": list(strategies),
        "llms": len(llm_ids),
        "families": named,
        "held_out": held_out_by_seed,
        "queries": {s: len(pool.rows(s)) for s in ("train", "val", "test")},
        "subsample": queries,
        "encoder": data.encoder,
        "per_seed": per_seed,
        "summary": summary,
        "wall_seconds": time.perf_counter() - started,
    }
