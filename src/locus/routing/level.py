"""A newcomer's level, read against how hard the pool found its probes.

An LLM joined since the fit has a level of its own: the mean P(correct) its reading is shifted
to (`locus.routing.thin.level_shift`). Its probes' mean says how it did on *those* queries, and
a few dozen probes are often easier or harder than the pool's queries as a whole: on
split2_model7 one seed's 16 random probes were answered by the pool at 0.55 against 0.44 on
all its training queries, and five newcomers read at their probes' mean (0.54-0.60, true
0.38-0.48) took 82-89% of the queries and cost the pool 5-12 points each. The fitted LLMs'
scores on the same probes say how easy they were; the reading, which sees only the fitted
LLMs' *predicted* P(correct) there, does not.

`pool_level` reads the newcomer as a one-parameter IRT model on the pool's easiness: P(correct
on q) = sigmoid(theta + e(q)), e(q) the logit of the fitted LLMs' mean score on q (smoothed by
half a score each way: `easiness`). theta is fitted to its scores on the probes the pool scored,
and its level is that model's mean over reference queries of the fit, drawn from the probes'
tasks in their proportions (`reference_rows`): the level of the newcomer on queries like its
probes, no longer on its probes. An LLM near the ceiling or the floor moves little with the
probes' easiness (the logit scale), unlike a control variate on the raw means (ZeroEval's
o1-mini, 0.975, read from 32 probes: 0.93 on the probes' mean, 0.87-0.91 by a control
variate). Its scores on queries the pool never scored (production outcomes on new queries)
keep their own mean, weighed by their number.

    >>> import numpy as np
    >>> e = np.array([2.0, 2.0, -1.0, -1.0])         # two easy probes, two hard ones
    >>> round(pool_level(np.array([1.0, 1.0, 0.0, 1.0]), e, np.zeros(8)), 3)
    0.762
    >>> round(pool_level(np.array([1.0, 0.0]), np.array([np.nan, np.nan]), np.zeros(3)), 3)
    0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from locus.calibration import evidence_quality, sigmoid
from locus.metrics import column_means
from locus.routing.evidence import unit_rows
from locus.routing.thin import bounded_level

if TYPE_CHECKING:
    from locus.routing.neighbours import KNNRouter

# the fit's training queries a joined LLM's level is read on (`reference_level`)
LEVEL_QUERIES = 512

__all__ = ["FitRows", "easiness", "pool_level", "reference_level", "reference_rows"]


def easiness(scores: NDArray[Any]) -> NDArray[np.float64]:
    """(n,) the logit of each query's mean score over the LLMs of `scores` (n, m) that were
    scored on it, smoothed by half a score each way as an LLM's evidence quality is
    (`locus.calibration.evidence_quality`: a query every LLM got right is not read as
    certain); NaN where none was.

    >>> easiness(np.array([[1.0, 1.0], [0.0, np.nan], [np.nan, np.nan]])).round(3).tolist()
    [1.609, -1.099, nan]
    """
    values = np.asarray(scores, np.float64)
    counts = (~np.isnan(values)).sum(axis=1)
    return evidence_quality(column_means(values.T), counts)


def pool_level(
    scores: NDArray[Any], probe_easiness: NDArray[Any], reference_easiness: NDArray[Any]
) -> float:
    """A newcomer's expected score on the reference queries: theta fitted so that the mean of
    sigmoid(theta + e) over its scored queries the pool knows (`probe_easiness` e not NaN) is
    its mean score there (kept within [1/2, n + 1/2] / (n + 1) of its n scores), read as the
    mean of sigmoid(theta + `reference_easiness`); its scores on queries the pool does not know
    count at their own mean, by their number. Without reference or known probes: its mean."""
    from scipy.optimize import brentq

    values = np.asarray(scores, np.float64).reshape(-1)
    probe = np.asarray(probe_easiness, np.float64).reshape(-1)
    reference = np.asarray(reference_easiness, np.float64).reshape(-1)
    reference = reference[~np.isnan(reference)]
    known = ~np.isnan(probe) & ~np.isnan(values)
    scored = ~np.isnan(values)
    if not known.any() or not len(reference):
        return float(values[scored].mean())
    n = int(known.sum())
    mean = bounded_level(float(values[known].mean()), n)
    on = probe[known]
    theta = brentq(lambda t: float(sigmoid(t + on).mean()) - mean, -60.0, 60.0, xtol=1e-8)
    level = float(sigmoid(theta + reference).mean())
    unknown = scored & ~known
    if not unknown.any():
        return level
    return (level * n + float(values[unknown].sum())) / (n + int(unknown.sum()))


def reference_rows(
    codes: NDArray[np.int32] | None,
    probe_codes: Sequence[int | None] | None,
    n_rows: int,
    size: int,
    seed: int = 0,
) -> NDArray[np.int64]:
    """Up to `size` of the rows 0 .. `n_rows` - 1 drawn with `seed`: from each task of the
    probes (`probe_codes`, each probe's task among `codes`, the rows' tasks; a code no row
    has, or None, counts as any task) in the probes' proportions, the rest from all rows;
    without tasks, at random. Sorted."""
    rng = np.random.default_rng(seed)
    if codes is None or not probe_codes:
        return np.sort(rng.choice(n_rows, min(size, n_rows), replace=False))
    row_codes = np.asarray(codes)[:n_rows]
    asked, counts = np.unique([-1 if c is None else c for c in probe_codes], return_counts=True)
    picked: list[NDArray[np.int64]] = []
    anywhere = 0
    for code, count in zip(asked.tolist(), counts.tolist(), strict=True):
        rows = np.flatnonzero(row_codes == code) if code >= 0 else np.arange(0)
        want = round(size * count / len(probe_codes))
        if not len(rows):
            anywhere += want
            continue
        picked.append(rng.choice(rows, min(want, len(rows)), replace=False))
    if anywhere:
        picked.append(rng.choice(n_rows, min(anywhere, n_rows), replace=False))
    return np.unique(np.concatenate(picked)) if picked else np.arange(0)


class FitRows:
    """The fit's training rows of a kNN router found by their query vectors: an onboarded LLM's
    probes are queries of the pool, and the fitted LLMs' scores on them are the kNN router's
    rows (`vectors` (n, d) those rows, unit length, as the kNN router keeps them). Each row is
    indexed by a 64-bit hash of its bits (16 bytes a row with its place, not its 1.5 KB: a
    million rows take 16 MB) and checked against the row itself on a hit."""

    def __init__(self, vectors: NDArray[np.float32]) -> None:
        self.vectors = vectors
        hashes = _row_hashes(vectors)
        self._order = np.argsort(hashes, kind="stable")
        self._sorted = hashes[self._order]

    def find(self, units: NDArray[np.float32]) -> NDArray[np.int64]:
        """(n,) the row of each unit query vector of `units`, -1 for one not among them."""
        queries = np.asarray(units, self.vectors.dtype)
        out = np.full(len(queries), -1, np.int64)
        if not len(self._sorted) or not len(queries):
            return out
        hashes = _row_hashes(queries)
        at = np.searchsorted(self._sorted, hashes)
        for i, start in enumerate(at.tolist()):
            while start < len(self._sorted) and self._sorted[start] == hashes[i]:
                row = int(self._order[start])
                if np.array_equal(self.vectors[row], queries[i]):
                    out[i] = row
                    break
                start += 1
        return out


def _row_hashes(rows: NDArray[Any], block: int = 8_192) -> NDArray[np.uint64]:
    """(n,) a 64-bit hash of each row's bits (a fixed random odd multiplier per column, the
    products summed modulo 2^64), in blocks of `block` rows."""
    words = np.ascontiguousarray(rows)
    words = words.view(np.uint32) if words.dtype.itemsize == 4 else words.view(np.uint64)
    multipliers = np.random.default_rng(0).integers(1, 2**63, words.shape[1], dtype=np.uint64)
    multipliers |= np.uint64(1)
    out = np.empty(len(words), np.uint64)
    for start in range(0, len(words), block):
        part = words[start : start + block].astype(np.uint64)
        out[start : start + block] = (part * multipliers).sum(axis=1, dtype=np.uint64)
    return out


def reference_level(
    knn: KNNRouter,
    fitted: Sequence[int],
    rows: FitRows,
    vectors: NDArray[np.float32],
    scores: NDArray[Any],
    tasks: Sequence[str | None],
    size: int = LEVEL_QUERIES,
) -> tuple[float, NDArray[np.float32]]:
    """(a joined LLM's level, the query vectors it holds on): `pool_level` of its `scores` on
    the queries of `vectors` (with their `tasks`, or none), the easiness of those and of the
    reference queries (`reference_rows`, `size` of the fit's `rows`) read from the kNN router's
    `fitted` columns (the LLMs of the fit)."""
    found = rows.find(unit_rows(np.asarray(vectors, np.float32)))
    vote = knn.task_vote_
    place = {} if vote is None else {name: i for i, name in enumerate(vote.names)}
    asked = None
    if len(tasks) == len(found):
        asked = [None if task is None else place.get(task) for task in tasks]
    codes = None if vote is None else vote.codes
    reference = reference_rows(codes, asked, len(rows.vectors), size)
    probe = np.full(len(found), np.nan)
    if (found >= 0).any():
        probe[found >= 0] = easiness(knn.scores_[found[found >= 0]][:, fitted])
    level = pool_level(scores, probe, easiness(knn.scores_[reference][:, fitted]))
    return level, np.asarray(rows.vectors[reference], np.float32)
