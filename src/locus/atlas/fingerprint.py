"""Fingerprinting: which known LLM is behind an endpoint, from its scored evidence alone.

An LLM embedded twice from disjoint evidence lands in two nearby places; how near is the LLM's
own spread. The verdict threshold comes from data: per LLM, the distance between a probe
embedded from k scores of one half of its queries and a reference embedded from the other half
("same"), against the probe's distance to every other LLM's reference ("different"); the
threshold calls as many "same" pairs same as it can while keeping false matches (a stranger
called the same LLM) at 1% (`choose_threshold`).

    >>> import numpy as np
    >>> choose_threshold(np.array([0.1, 0.2]), np.array([0.5, 0.9, 1.2]))
    0.35
    >>> round(choose_threshold(np.array([0.1, 0.3]), np.array([0.2, 0.9]), max_false_match=None), 3)
    0.15
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.distance import cdist

from locus.errors import LocusInputError

__all__ = [
    "Embedder",
    "FingerprintDraw",
    "Match",
    "choose_threshold",
    "draw_fingerprints",
    "fingerprint_report",
    "identify",
]

# what embeds evidence: [(query vectors (K_i, dq), scores (K_i,)), ...] -> (n, d); the facade's
# `Locus.embed_many`, injected so the atlas itself never imports torch
Embedder = Callable[[Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]]], NDArray[Any]]


@dataclass(frozen=True)
class FingerprintDraw:
    """One draw of the protocol: for each LLM (`llm_ids`), a reference embedding from one half
    of its scored queries and a probe from k scores of the other half (both (n, d))."""

    llm_ids: list[str]
    references: NDArray[np.float64]
    probes: NDArray[np.float64]
    k: int
    metric: str

    def distances(self) -> NDArray[np.float64]:
        """(n, n): probe i against reference j."""
        return np.asarray(cdist(self.probes, self.references, metric=self.metric))

    def same_and_different(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        d = self.distances()
        eye = np.eye(len(d), dtype=bool)
        return d[eye], d[~eye]


def draw_fingerprints(
    scores: NDArray[Any],
    vectors: NDArray[Any],
    llm_ids: Sequence[str],
    embed: Embedder,
    *,
    k: int,
    seed: int,
    reference_k: int | None = None,
    metric: str = "euclidean",
) -> FingerprintDraw:
    """Split each LLM's scored queries (`scores` (n_queries, n_llms), NaN = not scored) into two
    random halves; embed a reference from `reference_k` scores of one (default: all of it) and
    a probe from k scores of the other. LLMs with fewer than 2k scores are left out."""
    table = np.asarray(scores, dtype=np.float32)
    rng = np.random.default_rng([seed, k])
    kept, references, probes = [], [], []
    for j, llm in enumerate(llm_ids):
        rows = np.flatnonzero(~np.isnan(table[:, j]))
        if len(rows) < 2 * k:
            continue
        rows = rng.permutation(rows)
        half = len(rows) // 2
        first, second = rows[:half], rows[half:]
        if reference_k is not None:
            first = first[:reference_k]
        probe = second[:k]
        references.append((vectors[first], table[first, j]))
        probes.append((vectors[probe], table[probe, j]))
        kept.append(str(llm))
    if len(kept) < 2:
        raise LocusInputError(
            f"fingerprinting at {k} scores needs at least 2 LLMs with {2 * k}+ scored queries; "
            f"found {len(kept)}"
        )
    embedded = np.asarray(embed(references + probes), dtype=np.float64)
    return FingerprintDraw(kept, embedded[: len(kept)], embedded[len(kept) :], k, metric)


def choose_threshold(
    same: NDArray[Any], different: NDArray[Any], *, max_false_match: float | None = 0.01
) -> float:
    """The distance at or below which two embeddings are called the same LLM.

    With `max_false_match` (default 1%): the midpoint between observed distances that calls
    the most `same` distances same while calling at most that share of `different` ones same
    (a "same LLM" verdict should be trustworthy: a pool of n LLMs offers n - 1 strangers per
    probe). With None: the midpoint that maximises balanced accuracy (mean of the two rates).
    Ties go to the smaller threshold.
    """
    same = np.sort(np.asarray(same, dtype=np.float64))
    different = np.sort(np.asarray(different, dtype=np.float64))
    if not len(same) or not len(different):
        raise LocusInputError("a threshold needs both same-LLM and different-LLM distances")
    values = np.unique(np.concatenate([same, different]))
    candidates = np.concatenate([[values[0] - 1e-9], (values[1:] + values[:-1]) / 2])
    true_match = np.searchsorted(same, candidates, side="right") / len(same)
    false_match = np.searchsorted(different, candidates, side="right") / len(different)
    if max_false_match is None:
        objective = (true_match + 1.0 - false_match) / 2
    else:
        objective = np.where(false_match <= max_false_match + 1e-12, true_match, -1.0)
    return float(candidates[int(np.argmax(objective))])


def fingerprint_report(draw: FingerprintDraw, threshold: float) -> dict[str, Any]:
    """Identification accuracy (the probe's nearest reference is its own LLM), true-match rate
    (own reference within the threshold) and false-match rate (another LLM's reference within
    it, over all ordered pairs) of one draw."""
    d = draw.distances()
    n = len(d)
    same, different = draw.same_and_different()
    return {
        "k": draw.k,
        "llms": n,
        "threshold": threshold,
        "identification": float(np.mean(np.argmin(d, axis=1) == np.arange(n))),
        "true_match": float(np.mean(same <= threshold)),
        "false_match": float(np.mean(different <= threshold)),
        "same_distance": float(np.median(same)),
        "different_distance": float(np.median(different)),
    }


@dataclass(frozen=True)
class Match:
    """A known LLM's distance to the probe and the verdict (`same` when within threshold)."""

    llm_id: str
    distance: float
    same: bool

    def as_dict(self) -> dict[str, Any]:
        return {"llm_id": self.llm_id, "distance": self.distance, "same": self.same}


def identify(
    probe: NDArray[Any],
    references: NDArray[Any],
    llm_ids: Sequence[str],
    threshold: float,
    *,
    top: int = 5,
    metric: str = "euclidean",
) -> list[Match]:
    """The `top` known LLMs nearest to one probe embedding (d,), with verdicts."""
    d = cdist(np.asarray(probe, dtype=np.float64)[None, :], references, metric=metric)[0]
    order = np.lexsort((np.arange(len(d)), d))[:top]
    return [Match(str(llm_ids[i]), float(d[i]), bool(d[i] <= threshold)) for i in order]
