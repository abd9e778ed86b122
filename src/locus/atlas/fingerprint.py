"""Fingerprinting: which known LLM is behind an endpoint, from its scored evidence alone.

Two cases, told apart by the probe's queries:

- **New queries** (no known LLM has scored them): each known LLM is weighed by two signals of
  the probe's k scores: how likely they are under the LLM's measured per-task rates (a Bernoulli
  log-likelihood, graded scores read as fractional successes) and the distance between the
  probe's embedding and the LLM's. Each is standardised across the known LLMs (a z-score per
  probe, lower = more alike) and the two are added with a weight for the embedding chosen on a
  calibration draw of the pool itself (`choose_weight`): on pools where the embedding carries
  no identity (BFCL) the weight is 0, where it does (ZeroEval) it counts. The draw: the pool's
  queries split once into two halves; each LLM's reference from its scores on one half, its
  probe from k of its scores on the other (`draw_fingerprints`).
- **Shared queries** (`locus.atlas.agreement`): known LLMs scored the probe's queries, so the
  probe is compared with their actual scores.

The verdict threshold comes from data: the fused score of each probe against its own LLM
("same") and against the most alike other LLM ("nearest other"); the threshold calls as many
probes their own LLM as it can while calling at most 1% of them another LLM
(`choose_threshold`).

    >>> import numpy as np
    >>> choose_threshold(np.array([0.1, 0.2]), np.array([0.5, 0.9, 1.2]))
    0.35
    >>> round(choose_threshold(np.array([0.1, 0.3]), np.array([0.2, 0.9]), max_false_match=None), 3)
    0.15
    >>> rates = task_rates(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), np.array([0, 0, 1]), 2)
    >>> np.round(rates, 2).tolist()  # 2 LLMs x 2 tasks, smoothed towards the pool's task rate
    [[0.67, 0.4], [0.33, 0.6]]
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
    "EMBEDDING_WEIGHTS",
    "Embedder",
    "FingerprintDraw",
    "Match",
    "calibrate",
    "calibration_draws",
    "choose_threshold",
    "choose_weight",
    "draw_fingerprints",
    "fingerprint_report",
    "identify",
    "profile_loglik",
    "standardise",
    "task_rates",
]

# what embeds evidence: [(query vectors (K_i, dq), scores (K_i,)), ...] -> (n, d); the facade's
# `Locus.embed_many`, injected so the atlas itself never imports torch
Embedder = Callable[[Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]]], NDArray[Any]]

# the embedding's weight beside the per-task likelihood, tried on the calibration draw (inf:
# the embedding alone)
EMBEDDING_WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, float("inf"))
RATE_PRIOR = 4.0  # pseudo-scores pulling an LLM's task rate towards the pool's
EPSILON = 1e-3  # rates are kept within [EPSILON, 1 - EPSILON] for the log-likelihood


def task_rates(
    scores: NDArray[Any], task_index: NDArray[Any], n_tasks: int, *, prior: float = RATE_PRIOR
) -> NDArray[np.float64]:
    """(n_llms, n_tasks) each LLM's mean score per task (`scores` (n_queries, n_llms), NaN =
    not scored; `task_index` (n_queries,) in [0, n_tasks)), smoothed with `prior` pseudo-scores
    at the pool's rate on that task, so a task an LLM was barely scored on reads as typical."""
    table = np.asarray(scores, dtype=np.float64)
    index = np.asarray(task_index, dtype=np.int64)
    scored = ~np.isnan(table)
    sums = np.zeros((n_tasks, table.shape[1]))
    counts = np.zeros((n_tasks, table.shape[1]))
    np.add.at(sums, index, np.where(scored, table, 0.0))
    np.add.at(counts, index, scored)
    pool = sums.sum(axis=1) / np.maximum(counts.sum(axis=1), 1.0)
    return ((sums + prior * pool[:, None]) / (counts + prior)).T


def profile_loglik(
    rates: NDArray[Any], task_index: NDArray[Any], scores: NDArray[Any]
) -> NDArray[np.float64]:
    """(n_llms,) mean log-likelihood per score of one probe (its queries' tasks `task_index`
    (k,), `scores` (k,) in [0, 1]) under each LLM's task `rates` (n_llms, n_tasks)."""
    p = np.clip(np.asarray(rates, dtype=np.float64)[:, task_index], EPSILON, 1 - EPSILON)
    y = np.asarray(scores, dtype=np.float64)[None, :]
    return np.mean(y * np.log(p) + (1 - y) * np.log1p(-p), axis=1)


def standardise(values: NDArray[Any]) -> NDArray[np.float64]:
    """Each row as z-scores across its columns (a constant row: zeros)."""
    array = np.asarray(values, dtype=np.float64)
    spread = array.std(axis=-1, keepdims=True)
    return (array - array.mean(axis=-1, keepdims=True)) / np.where(spread > 0, spread, 1.0)


@dataclass(frozen=True)
class FingerprintDraw:
    """One draw of the protocol, for each LLM (`llm_ids`): a reference embedding from its
    scores on one half of the pool's queries and a probe from k of its scores on the other
    (`references`, `probes` (n, d)); `rates` (n, n_tasks) each LLM's task rates on its
    reference half; `loglik` (n, n): probe i's mean log-likelihood under LLM j's rates;
    `first_half` (n_queries,) the reference half; `probe_rows` each probe's query rows."""

    llm_ids: list[str]
    references: NDArray[np.float64]
    probes: NDArray[np.float64]
    rates: NDArray[np.float64]
    loglik: NDArray[np.float64]
    k: int
    metric: str
    first_half: NDArray[np.bool_]
    probe_rows: list[NDArray[np.int64]]

    def distances(self) -> NDArray[np.float64]:
        """(n, n): probe i's embedding against reference j's."""
        return np.asarray(cdist(self.probes, self.references, metric=self.metric))

    def scores(self, weight: float) -> NDArray[np.float64]:
        """(n, n) probe i against LLM j, lower = more alike: the standardised per-task
        likelihood plus `weight` x the standardised embedding distance (inf: the distance
        alone)."""
        distance = standardise(self.distances())
        if np.isinf(weight):
            return distance
        return standardise(-self.loglik) + weight * distance

    def score_probe(
        self,
        embedding: NDArray[Any],
        task_index: NDArray[Any],
        scores: NDArray[Any],
        weight: float,
    ) -> NDArray[np.float64]:
        """(n,) a new probe (its embedding (d,), its queries' tasks and its scores) against
        each LLM of the draw, on the scale of `scores(weight)`."""
        distance = cdist(
            np.asarray(embedding, dtype=np.float64)[None, :], self.references, metric=self.metric
        )
        if np.isinf(weight):
            return standardise(distance)[0]
        loglik = profile_loglik(self.rates, task_index, scores)[None, :]
        return (standardise(-loglik) + weight * standardise(distance))[0]

    def identification(self, weight: float) -> float:
        """Share of probes whose best-scoring LLM is their own."""
        s = self.scores(weight)
        return float(np.mean(np.argmin(s, axis=1) == np.arange(len(s))))

    def same_and_different(self, weight: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Each probe's score against its own LLM (n,) and against every other (n (n - 1),)."""
        s = self.scores(weight)
        eye = np.eye(len(s), dtype=bool)
        return s[eye], s[~eye]

    def same_and_nearest_other(
        self, weight: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Each probe's score against its own LLM and against the most alike other LLM (both
        (n,)): what a verdict on the best match is calibrated on, since a probe meets every
        known LLM, not one."""
        s = self.scores(weight)
        eye = np.eye(len(s), dtype=bool)
        return s[eye], np.where(eye, np.inf, s).min(axis=1)


def draw_fingerprints(
    scores: NDArray[Any],
    vectors: NDArray[Any],
    task_index: NDArray[Any],
    llm_ids: Sequence[str],
    embed: Embedder,
    *,
    k: int,
    seed: int,
    metric: str = "euclidean",
) -> FingerprintDraw:
    """Split the pool's queries (`scores` (n_queries, n_llms), NaN = not scored) into two
    random halves, the same for every LLM; embed each LLM's reference from its scores on the
    first and its probe from k of its scores on the second. LLMs with fewer than k scores on
    the second half are left out."""
    table = np.asarray(scores, dtype=np.float32)
    index = np.asarray(task_index, dtype=np.int64)
    n_tasks = int(index.max()) + 1 if len(index) else 1
    rng = np.random.default_rng([seed, k])
    first = np.zeros(len(table), dtype=bool)
    first[rng.permutation(len(table))[: len(table) // 2]] = True
    kept, references, probes, probe_rows = [], [], [], []
    for j in range(len(llm_ids)):
        scored = ~np.isnan(table[:, j])
        second = np.flatnonzero(scored & ~first)
        reference = np.flatnonzero(scored & first)
        if len(second) < k or not len(reference):
            continue
        probe = rng.permutation(second)[:k]
        references.append((vectors[reference], table[reference, j]))
        probes.append((vectors[probe], table[probe, j]))
        probe_rows.append((probe, j))
        kept.append(j)
    if len(kept) < 2:
        raise LocusInputError(
            f"fingerprinting at {k} scores needs at least 2 LLMs with {k}+ scored queries on "
            f"each half of the pool's queries; found {len(kept)}"
        )
    embedded = np.asarray(embed(references + probes), dtype=np.float64)
    rates = task_rates(np.where(first[:, None], table, np.nan), index, n_tasks)[kept]
    loglik = np.array(
        [profile_loglik(rates, index[rows], table[rows, j]) for rows, j in probe_rows]
    )
    return FingerprintDraw(
        [str(llm_ids[j]) for j in kept],
        embedded[: len(kept)],
        embedded[len(kept) :],
        rates,
        loglik,
        k,
        metric,
        first,
        [rows for rows, _ in probe_rows],
    )


def choose_weight(
    draws: FingerprintDraw | Sequence[FingerprintDraw],
    weights: Sequence[float] = EMBEDDING_WEIGHTS,
) -> float:
    """The embedding's weight (of `weights`) that identifies most probes over the draws; ties
    go to the earlier weight."""
    pool = [draws] if isinstance(draws, FingerprintDraw) else list(draws)
    found = [sum(d.identification(w) * len(d.llm_ids) for d in pool) for w in weights]
    return float(weights[int(np.argmax(found))])


def calibrate(
    draws: Sequence[FingerprintDraw],
    *,
    weights: Sequence[float] = EMBEDDING_WEIGHTS,
    max_false_verdict: float = 0.01,
) -> tuple[float, float]:
    """(weight, threshold) from calibration draws: the weight (of `weights`) that identifies
    most probes, and the threshold calling at most `max_false_verdict` of the probes some
    other LLM."""
    weight = choose_weight(draws, weights)
    pairs = [d.same_and_nearest_other(weight) for d in draws]
    same = np.concatenate([p[0] for p in pairs])
    other = np.concatenate([p[1] for p in pairs])
    return weight, choose_threshold(same, other, max_false_match=max_false_verdict)


def calibration_draws(
    draw: Callable[[int], FingerprintDraw], *, seed: int, min_probes: int = 100
) -> list[FingerprintDraw]:
    """Draws (`draw(seed)`) from `seed` on until they hold `min_probes` probes: a small pool
    needs several for a threshold that means anything."""
    draws = [draw(seed)]
    while sum(len(d.llm_ids) for d in draws) < min_probes:
        draws.append(draw(seed + len(draws)))
    return draws


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


def fingerprint_report(draw: FingerprintDraw, weight: float, threshold: float) -> dict[str, Any]:
    """Identification accuracy (the probe's best-scoring LLM is its own), true-match rate (its
    own LLM within the threshold), false-match rate (another LLM within it, over all ordered
    pairs) and false-verdict rate (some other LLM within it, per probe) of one draw at one
    embedding weight."""
    s = draw.scores(weight)
    n = len(s)
    same, different = draw.same_and_different(weight)
    _, nearest_other = draw.same_and_nearest_other(weight)
    return {
        "k": draw.k,
        "llms": n,
        "weight": weight,
        "threshold": threshold,
        "identification": float(np.mean(np.argmin(s, axis=1) == np.arange(n))),
        "true_match": float(np.mean(same <= threshold)),
        "false_match": float(np.mean(different <= threshold)),
        "false_verdict": float(np.mean(nearest_other <= threshold)),
        "same_score": float(np.median(same)),
        "different_score": float(np.median(different)),
    }


@dataclass(frozen=True)
class Match:
    """A known LLM's score against the probe (lower = more alike) and the verdict (`same`
    when within the threshold)."""

    llm_id: str
    score: float
    same: bool

    def as_dict(self) -> dict[str, Any]:
        return {"llm_id": self.llm_id, "score": self.score, "same": self.same}


def identify(
    scores: NDArray[Any], llm_ids: Sequence[str], threshold: float, *, top: int = 5
) -> list[Match]:
    """The `top` known LLMs with the lowest `scores` (n_llms,) for one probe, with verdicts."""
    values = np.asarray(scores, dtype=np.float64)
    order = np.lexsort((np.arange(len(values)), values))[:top]
    return [Match(str(llm_ids[i]), float(values[i]), bool(values[i] <= threshold)) for i in order]
