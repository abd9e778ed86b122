"""Probe selection: which queries to evaluate a new LLM on, so that its few scores place it well.

Strategies (`probe_order` gives an order: the first n are the n probes, for every n):

- `random`: a seeded shuffle of the candidate queries.
- `anchors`: the fit's shared anchor order (`locus.data.anchor_choice` with the training
  seed), the queries every LLM of the pool was embedded from.
- `informative`: queries the pool disagrees on, spread over the query space: candidates are
  the quarter of queries with the largest variance of the pool's scores (a query every LLM
  gets right, or every LLM wrong, says nothing about a new one), ordered by farthest-point
  selection on their query vectors, so the probes cover the tasks instead of crowding into
  one region.
- `mixed`: `informative` and `random` in turn: half the probes chosen for what they tell
  apart, half a plain sample, so the new LLM's mean score on its probes stays an unbiased
  estimate of its level (disputed queries alone are harder than the average query).
- `stratified`: a random sample stratified by task, in proportion to each task's share of the
  candidates: every prefix of the order holds each task within one query of its share, so the
  new LLM's per-task rates (its task vote) are read on every task, and its mean stays an
  unbiased estimate of its level. Without tasks: `random`.
- `balanced`: a random sample stratified by how easy the pool finds each query (the mean of
  the pool's scores on it): the candidates ranked by it, each prefix of the order spread
  evenly over the ranks (a randomly shifted bit-reversal order, so the first 2^j are a
  systematic sample). A new LLM's probe mean stays unbiased and no longer rests on the luck
  of drawing easy or hard probes: the pool's scores say which queries are easy, and a new
  LLM is right more often where the pool is.

    >>> from locus.store import Store                                       # doctest: +SKIP
    >>> with Store.open(".locus") as store:  # doctest: +SKIP
    ...     probes = choose_probes(store, 32, strategy="random")

Measured (benchmarks/README, "Probes"): `balanced` probes estimate a new LLM's accuracy 15-40%
closer than random ones on every real pool (the probes' mean, each LLM of a pool in turn), but
route no better: a newcomer read at its true level takes more queries than it should on a pool
of near-equal LLMs (docs/decisions.md, "Newcomers"), so `random`
stays the default. The disputed queries `informative` picks are harder than average, which
biases the new LLM's evidence level and moves its evidence off the random sets the encoder was
trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError

__all__ = ["STRATEGIES", "choose_probes", "first_scored", "probe_order"]

STRATEGIES = ("random", "anchors", "informative", "mixed", "stratified", "balanced")


def probe_order(
    scores: NDArray[Any],
    vectors: NDArray[np.float32],
    rows: NDArray[np.int64],
    strategy: str = "random",
    *,
    seed: int = 0,
    share: float = 0.25,
    tasks: Sequence[str | None] = (),
) -> NDArray[np.int64]:
    """The candidate `rows` in probe order for `strategy` (see the module).

    Args:
        scores: (n_queries, n_llms) the pool's scores (NaN: not evaluated).
        vectors: (n_queries, dq) query vectors.
        rows: the candidate queries (e.g. the training rows).
        share: `informative`: the share of candidates, by disagreement, it spreads over.
        tasks: `stratified`: the task of every query (n_queries,), None where unknown.

    `balanced` ranks by `scores` too: a candidate no LLM was scored on counts as of the
    candidates' mean easiness.

    Raises:
        LocusInputError: an unknown strategy, or no candidate.
    """
    if strategy not in STRATEGIES:
        raise LocusInputError(
            f"unknown probe strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}"
        )
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        raise LocusInputError("no candidate queries to choose probes from")
    rng = np.random.default_rng([seed, 11])
    if strategy == "random":
        return rows[rng.permutation(len(rows))]
    if strategy == "mixed":
        informative = probe_order(scores, vectors, rows, "informative", seed=seed, share=share)
        plain = probe_order(scores, vectors, rows, "random", seed=seed)
        interleaved = np.empty(2 * len(rows), dtype=np.int64)
        interleaved[0::2], interleaved[1::2] = informative, plain
        _, first = np.unique(interleaved, return_index=True)
        return interleaved[np.sort(first)]
    if strategy == "anchors":  # the order `choose_anchors` draws with the training seed
        return rows[np.random.default_rng(seed).permutation(len(rows))]
    if strategy == "stratified":
        return _stratified(rows, tasks, rng)
    if strategy == "balanced":
        return _balanced(rows, scores, rng)
    pool = np.asarray(scores, dtype=np.float64)[rows]
    with np.errstate(invalid="ignore"):
        spread = np.nanvar(pool, axis=1)
    spread = np.where(np.isnan(spread), -1.0, spread)
    count = max(1, round(share * len(rows)))
    keep = np.argsort(-spread, kind="stable")[:count]
    candidates = rows[keep]
    unit = np.asarray(vectors, dtype=np.float32)[candidates]
    unit = unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
    chosen = [0]  # the most disputed query first
    nearest = 1.0 - unit @ unit[0]  # cosine distance to the chosen set
    for _ in range(1, len(candidates)):
        nearest[chosen[-1]] = -1.0
        pick = int(np.argmax(nearest))
        chosen.append(pick)
        nearest = np.minimum(nearest, 1.0 - unit @ unit[pick])
    ordered = candidates[np.asarray(chosen, dtype=np.int64)]
    rest = np.setdiff1d(rows, ordered, assume_unique=True)
    return np.concatenate([ordered, rest[rng.permutation(len(rest))]])


def _stratified(
    rows: NDArray[np.int64], tasks: Sequence[str | None], rng: np.random.Generator
) -> NDArray[np.int64]:
    """`rows` in a proportional stratified order: within each task a random order; the i-th
    of a task of n rows sits at (i + u) / n of the whole (u one random offset per task), so
    any prefix holds each task in proportion to its size (within one row)."""
    if len(tasks) == 0:
        return rows[rng.permutation(len(rows))]
    labels = np.array(["" if tasks[i] is None else str(tasks[i]) for i in rows])
    keys = np.empty(len(rows), dtype=np.float64)
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        place = rng.permutation(len(members))
        keys[members] = (place + rng.random()) / len(members)
    return rows[np.lexsort((rng.random(len(rows)), keys))]


def _balanced(
    rows: NDArray[np.int64], scores: NDArray[Any], rng: np.random.Generator
) -> NDArray[np.int64]:
    """`rows` ranked by the pool's mean score on them (ties in random order), then taken in a
    randomly shifted bit-reversal order of the ranks: the first 2^j of them are evenly spaced
    over the ranks (one per stratum of easiness), any other prefix nearly so."""
    pool = np.asarray(scores, dtype=np.float64)[rows]
    scored = (~np.isnan(pool)).sum(axis=1)
    easiness = np.nansum(pool, axis=1) / np.maximum(scored, 1)
    known = scored > 0
    easiness[~known] = easiness[known].mean() if known.any() else 0.0
    ranked = rows[np.lexsort((rng.random(len(rows)), easiness))]
    bits = max(int(len(rows) - 1).bit_length(), 1)
    places = np.arange(1 << bits)
    reversed_places = np.zeros_like(places)
    for bit in range(bits):  # the bit-reversal of each place's index
        reversed_places |= ((places >> bit) & 1) << (bits - 1 - bit)
    shifted = (reversed_places + int(rng.integers(1 << bits))) % (1 << bits)
    return ranked[shifted[shifted < len(rows)]]


def choose_probes(
    store: Any,
    n: int,
    *,
    strategy: str = "random",
    seed: int = 0,
    split_seed: int = 0,
) -> list[dict[str, Any]]:
    """The `n` queries of the workspace to evaluate a new LLM on (training queries only, so
    a later evaluation's test queries stay unseen): [{query_id, query_text, task}].

    Raises:
        LocusInputError: n below 1, an unknown strategy, a workspace without encoded queries.
    """
    from locus.pipeline.data import workspace_table

    if n < 1:
        raise LocusInputError(f"probes: n must be at least 1, found {n}")
    data = workspace_table(store, split_seed=split_seed)
    table = data.table
    order = probe_order(
        table.scores, data.vectors, data.rows("train"), strategy, seed=seed, tasks=table.tasks
    )
    return [
        {"query_id": table.query_ids[i], "query_text": table.query_texts[i], "task": table.tasks[i]}
        for i in order[:n]
    ]


def first_scored(
    order: NDArray[np.int64], observed: Sequence[bool] | NDArray[Any], n: int
) -> NDArray[np.int64]:
    """The first `n` rows of `order` an LLM was scored on (`observed`, by row)."""
    mask = np.asarray(observed, dtype=bool)[order]
    return order[mask][:n]
