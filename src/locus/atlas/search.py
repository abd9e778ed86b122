"""Capability search: the real LLMs nearest to a profile of per-task success rates.

A profile ({"math": 0.8, "law": 0.3}) becomes synthetic evidence, queries of those tasks scored
so that each task's share of correct answers is its rate, embedded like any LLM's evidence; the
nearest real LLM embeddings are the answer.

    >>> import numpy as np
    >>> tasks = np.array(["math"] * 6 + ["law"] * 4)
    >>> rows, scores = synthesise_evidence({"math": 0.5, "law": 1.0}, tasks, 8, seed=0)
    >>> sorted(set(tasks[rows].tolist())), float(scores[tasks[rows] == "law"].mean())
    (['law', 'math'], 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.distance import cdist

from locus.atlas.fingerprint import Embedder
from locus.errors import LocusInputError

__all__ = ["capability_recall", "parse_profile", "synthesise_evidence", "task_profiles"]

DEFAULT_SYNTHETIC = 8192


def parse_profile(text: str, tasks: Sequence[str]) -> dict[str, float]:
    """`"math=0.8,law=0.3"` -> {"math": 0.8, "law": 0.3}, each task one of `tasks`.

    Raises:
        LocusInputError: a malformed item, a rate outside [0, 1], a task the pool lacks.
    """
    known = sorted(set(tasks))
    profile: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            rate = float(value) if sep else float("nan")
        except ValueError:
            rate = float("nan")
        if not name or not 0.0 <= rate <= 1.0:
            raise LocusInputError(
                f"profile item {item!r}: expected task=rate with a rate in [0, 1], e.g. math=0.8"
            )
        if name not in known:
            shown = ", ".join(known[:15]) + (", ..." if len(known) > 15 else "")
            raise LocusInputError(f"profile names task {name!r}; the pool's tasks are: {shown}")
        profile[name] = rate
    if not profile:
        raise LocusInputError("empty profile: expected task=rate pairs such as math=0.8,law=0.3")
    return profile


def synthesise_evidence(
    profile: Mapping[str, float],
    tasks: NDArray[Any],
    n: int,
    *,
    seed: int,
    rows: NDArray[np.int64] | None = None,
    shares_by: str = "pool",
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """n synthetic (row, score) pairs: queries of the profile's tasks (drawn from `rows`,
    default every row, without replacement while the task has unused queries), exactly
    round(rate * share) of each task's share scored 1, placed at random.

    `shares_by="pool"` gives each task a share in proportion to its queries in the pool, as
    real evidence has (on BFCL, recall@10 of every LLM from its own profile: 0.97, against
    0.82 with `"equal"` shares); `"equal"` gives every task the same share.
    """
    candidates = np.arange(len(tasks)) if rows is None else np.asarray(rows)
    rng = np.random.default_rng(seed)
    names = list(profile)
    if shares_by not in ("pool", "equal"):
        raise LocusInputError(f"shares by {shares_by!r}: expected pool or equal")
    if shares_by == "pool":
        sizes = np.array([np.sum(np.asarray(tasks)[candidates] == name) for name in names], float)
        exact = n * sizes / max(sizes.sum(), 1.0)
        shares = np.floor(exact).astype(int).tolist()
        for i in np.argsort(-(exact - np.floor(exact)))[: n - sum(shares)]:
            shares[int(i)] += 1
    else:
        shares = [n // len(names) + (1 if i < n % len(names) else 0) for i in range(len(names))]
    picked, scores = [], []
    for name, share in zip(names, shares, strict=True):
        pool = candidates[np.asarray(tasks)[candidates] == name]
        if not len(pool):
            raise LocusInputError(f"task {name!r} has no queries to draw evidence from")
        repeats = -(-share // len(pool))
        drawn = np.concatenate([rng.permutation(pool) for _ in range(repeats)])[:share]
        correct = np.zeros(share, dtype=np.float32)
        correct[: round(profile[name] * share)] = 1.0
        picked.append(drawn)
        scores.append(rng.permutation(correct))
    return np.concatenate(picked).astype(np.int64), np.concatenate(scores)


def task_profiles(scores: NDArray[Any], tasks: NDArray[Any]) -> list[dict[str, float]]:
    """Each LLM's mean score per task ((n_queries, n_llms) scores, NaN = not scored)."""
    table = np.asarray(scores, dtype=np.float64)
    names = sorted({str(t) for t in np.asarray(tasks).tolist() if t is not None})
    profiles = []
    for j in range(table.shape[1]):
        profile = {}
        for name in names:
            column = table[np.asarray(tasks) == name, j]
            column = column[~np.isnan(column)]
            if len(column):
                profile[name] = float(column.mean())
        profiles.append(profile)
    return profiles


def capability_recall(
    profiles: Sequence[Mapping[str, float]],
    tasks: NDArray[Any],
    vectors: NDArray[Any],
    embeddings: NDArray[Any],
    embed: Embedder,
    *,
    n: int = DEFAULT_SYNTHETIC,
    ks: Sequence[int] = (1, 5, 10),
    seed: int = 0,
    rows: NDArray[np.int64] | None = None,
    metric: str = "euclidean",
    shares_by: str = "pool",
) -> dict[str, Any]:
    """Recall@k of each real LLM (row i of `embeddings`) searched for by its own per-task
    profile: the share of LLMs found among the k nearest to their synthetic embedding."""
    evidence = []
    for i, profile in enumerate(profiles):
        picked, scores = synthesise_evidence(
            profile, tasks, n, seed=seed + i, rows=rows, shares_by=shares_by
        )
        evidence.append((np.asarray(vectors)[picked], scores))
    synthetic = np.asarray(embed(evidence), dtype=np.float64)
    d = cdist(synthetic, np.asarray(embeddings, dtype=np.float64), metric=metric)
    ranks = np.array([int(np.sum(d[i] < d[i, i])) for i in range(len(d))])  # 0 = nearest
    return {
        "llms": len(d),
        "synthetic_queries": n,
        "recall": {str(k): float(np.mean(ranks < k)) for k in ks},
        "median_rank": float(np.median(ranks) + 1),
    }
