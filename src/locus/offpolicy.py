"""What a router would have scored on evidence where each query was answered by few LLMs.

A production log answers each prompt with one LLM (the one the logging policy chose), so a
router's hit@1 cannot be read off it as off a dense table: on the queries the router would send
elsewhere, nothing is known. Restricting each router's choice to the scored LLMs (what
`locus.metrics.routing_accuracy` does, right for a dense table with a few gaps) makes every router
choose the one logged LLM, and every router, random and oracle included, scores the same.

The estimates here weigh each scored (query, LLM) cell by the probability that it was scored
(its *logging probability*): the inverse-propensity estimate (IPS) of a router's hit@1 is the
mean over queries of sum_a 1[router chose a] y(q, a) / p(a | q) over the LLMs a scored on q. On
a dense table p = 1 and it is exactly hit@1; on a log where one of 4 LLMs was drawn uniformly
per prompt, p = 1/4. Where the log does not say p, each LLM's share of the queries (`inclusion`)
stands in: right where the logging did not depend on the prompt (uniform or fixed-share traffic
splits), biased where it did (a router's own choices). The doubly robust estimate (DR) adds a
reward model's prediction and weighs only its errors; the direct method (DM) is the reward
model's mean alone, which is only as good as that model.

    >>> import numpy as np
    >>> truth = np.array([[1.0, np.nan], [np.nan, 0.0], [np.nan, 1.0], [0.0, np.nan]])
    >>> overlap_of(truth).llms_per_query
    1.0
    >>> hit = ips(np.array([0, 1, 1, 1]), truth)          # p = 1/2 each
    >>> round(hit.value, 3), hit.queries
    (1.0, 4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.metrics import routing_accuracy

__all__ = [
    "SPARSE_BELOW",
    "Estimate",
    "Overlap",
    "direct",
    "doubly_robust",
    "inclusion",
    "ips",
    "overlap_of",
    "paired_ips",
    "selection_hit",
]

# below this overlap (`Overlap.overlap`), a table is a log, not a dense table: routers are
# compared off-policy. ZeroEval, the sparsest of the developers' dense pools, has 0.82.
SPARSE_BELOW = 0.5
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Overlap:
    """How much the LLMs of a score table share their queries.

    Attributes:
        queries: queries scored by at least one LLM.
        llms: the table's LLMs.
        llms_per_query: the mean number of LLMs scored on a scored query.
        overlap: the mean over scored queries of (LLMs scored - 1) / (LLMs - 1): 1 for a dense
            table, 0 where each query was answered by one LLM.
    """

    queries: int
    llms: int
    llms_per_query: float
    overlap: float

    @classmethod
    def from_counts(cls, queries: int, llms: int, cells: int) -> Overlap:
        """From a table's scored queries, LLMs and scored cells (`Store.cell_counts`).

        >>> Overlap.from_counts(600, 4, 600).overlap
        0.0
        """
        if queries == 0 or llms == 0:
            return cls(queries, llms, 0.0, 0.0)
        per_query = cells / queries
        return cls(queries, llms, per_query, (per_query - 1) / (llms - 1) if llms > 1 else 1.0)

    @property
    def sparse(self) -> bool:
        """Whether routers must be compared off-policy (`SPARSE_BELOW`)."""
        return self.llms >= 2 and self.overlap < SPARSE_BELOW

    def describe(self) -> str:
        """One line for the user."""
        if self.overlap == 0:
            shared = "each query was answered by one LLM"
        else:
            shared = f"overlap {self.overlap:.0%}"
        return (
            f"sparse evidence: {self.queries:,} queries scored by {self.llms_per_query:.2f} of "
            f"{self.llms} LLMs each on average ({shared}), as in a production log: each LLM is "
            "read from its own scored queries, and routers are compared off-policy"
        )


def overlap_of(truth: NDArray[np.floating[Any]]) -> Overlap:
    """`Overlap` of a (n_queries, n_llms) table (NaN: not scored)."""
    observed = ~np.isnan(np.asarray(truth, np.float64))
    per_query = observed.sum(axis=1)
    scored = per_query > 0
    n_llms = observed.shape[1] if observed.ndim == 2 else 0
    if not scored.any() or n_llms == 0:
        return Overlap(0, n_llms, 0.0, 0.0)
    counts = per_query[scored]
    share = float(np.mean((counts - 1) / (n_llms - 1))) if n_llms > 1 else 1.0
    return Overlap(int(scored.sum()), n_llms, float(counts.mean()), share)


@dataclass(frozen=True)
class Estimate:
    """An estimate of a router's mean score per query, with its standard error.

    Attributes:
        value: the estimate.
        se: its standard error over queries (inf with fewer than two queries).
        queries: the queries it is over.
        method: "ips", "dr" or "dm" (`locus.offpolicy`).
    """

    value: float
    se: float
    queries: int
    method: str

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% normal interval."""
        return self.value - Z95 * self.se, self.value + Z95 * self.se

    def as_dict(self) -> dict[str, Any]:
        low, high = self.interval
        finite = math.isfinite(self.se)
        return {
            "value": self.value,
            "se": self.se if finite else None,
            "low": low if finite else None,
            "high": high if finite else None,
            "queries": self.queries,
            "method": self.method,
        }


def inclusion(truth: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
    """(n_llms,) each LLM's share of the scored queries: the probability that a query was
    answered by it, where the logging did not depend on the query."""
    observed = ~np.isnan(np.asarray(truth, np.float64))
    scored = observed.any(axis=1)
    return observed[scored].mean(axis=0) if scored.any() else np.zeros(observed.shape[1])


def _propensity(
    truth: NDArray[np.float64], propensity: NDArray[np.floating[Any]] | None
) -> NDArray[np.float64]:
    """(n_queries, n_llms) the probability that each cell was scored."""
    if propensity is None:
        return np.broadcast_to(inclusion(truth), truth.shape)
    p = np.broadcast_to(np.asarray(propensity, np.float64), truth.shape)
    logged = ~np.isnan(truth)
    if not (p[logged] > 0).all():
        raise LocusInputError("a logged cell has a logging probability of 0: expected (0, 1]")
    return p


def _checked(choice: NDArray[Any], truth: NDArray[Any]) -> tuple[NDArray[np.int64], NDArray[Any]]:
    t = np.asarray(truth, np.float64)
    c = np.asarray(choice, np.int64).reshape(-1)
    if t.ndim != 2 or len(c) != len(t):
        raise LocusInputError(
            f"one choice per query: found {len(c)} choices for a table of shape {t.shape}"
        )
    if ((c < 0) | (c >= t.shape[1])).any():
        raise LocusInputError(f"a choice outside the table's {t.shape[1]} LLMs")
    return c, t


def _weighted_hits(
    choice: NDArray[np.int64], truth: NDArray[np.float64], p: NDArray[np.float64]
) -> NDArray[np.float64]:
    """(n,) per query: its chosen LLM's score over that cell's logging probability, 0 where
    the chosen LLM was not scored."""
    rows = np.arange(len(truth))
    y, chosen_p = truth[rows, choice], p[rows, choice]
    return np.where(np.isnan(y), 0.0, np.nan_to_num(y) / np.where(chosen_p > 0, chosen_p, 1.0))


def _estimate(per_query: NDArray[np.float64], method: str) -> Estimate:
    n = len(per_query)
    if n == 0:
        return Estimate(math.nan, math.inf, 0, method)
    se = float(per_query.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    return Estimate(float(per_query.mean()), se, n, method)


def _scored(truth: NDArray[np.float64]) -> NDArray[np.bool_]:
    return np.asarray(~np.isnan(truth).all(axis=1), bool)


def ips(
    choice: NDArray[Any],
    truth: NDArray[np.floating[Any]],
    propensity: NDArray[np.floating[Any]] | None = None,
) -> Estimate:
    """The inverse-propensity estimate of the mean score of a router choosing `choice`
    (n_queries,) columns of `truth` (n_queries, n_llms; NaN: not scored), over the queries
    scored by some LLM. `propensity`: each cell's logging probability, (n_queries, n_llms) or
    (n_llms,); default `inclusion`.

    Raises:
        LocusInputError: shapes that disagree, or a logged cell of logging probability 0.
    """
    c, t = _checked(choice, truth)
    keep = _scored(t)
    p = _propensity(t, propensity)
    return _estimate(_weighted_hits(c, t, p)[keep], "ips")


def paired_ips(
    choice: NDArray[Any],
    other: NDArray[Any],
    truth: NDArray[np.floating[Any]],
    propensity: NDArray[np.floating[Any]] | None = None,
) -> Estimate:
    """The inverse-propensity estimate of the mean gain of `choice` over `other` (both
    (n_queries,)), paired per query: its standard error is that of the difference (on a
    dense table, exactly the paired difference of their hit@1)."""
    c, t = _checked(choice, truth)
    o, _ = _checked(other, truth)
    keep = _scored(t)
    p = _propensity(t, propensity)
    return _estimate((_weighted_hits(c, t, p) - _weighted_hits(o, t, p))[keep], "ips")


def direct(choice: NDArray[Any], reward: NDArray[np.floating[Any]]) -> Estimate:
    """The direct-method estimate: the mean of a reward model's P(correct) `reward`
    (n_queries, n_llms) of the chosen LLMs. Only as good as the reward model: where it is the
    router's own P(correct), it grades the router by its own belief."""
    r = np.asarray(reward, np.float64)
    c, _ = _checked(choice, r)
    return _estimate(r[np.arange(len(r)), c], "dm")


def doubly_robust(
    choice: NDArray[Any],
    truth: NDArray[np.floating[Any]],
    reward: NDArray[np.floating[Any]],
    propensity: NDArray[np.floating[Any]] | None = None,
) -> Estimate:
    """The doubly robust estimate: the reward model's P(correct) `reward` (n_queries,
    n_llms) of the chosen LLM, corrected by its inverse-propensity weighted error where the
    chosen LLM was scored; unbiased where either the logging probabilities or the reward
    model are right, and of lower variance than `ips` where the model is good."""
    c, t = _checked(choice, truth)
    r = np.asarray(reward, np.float64)
    if r.shape != t.shape:
        raise LocusInputError(f"reward {r.shape} and truth {t.shape} must have one shape")
    keep = _scored(t)
    p = _propensity(t, propensity)
    rows = np.arange(len(t))
    model = r[rows, c]
    error = np.where(np.isnan(t[rows, c]), 0.0, np.nan_to_num(t[rows, c]) - model)
    per_query = model + error / np.where(p[rows, c] > 0, p[rows, c], 1.0)
    return _estimate(per_query[keep], "dr")


def selection_hit(proba: NDArray[np.floating[Any]], truth: NDArray[np.floating[Any]]) -> float:
    """hit@1 as a fit compares routers (a k, a checkpoint, a margin) on `truth` (n_queries,
    n_llms; NaN: not scored): on a dense table `locus.metrics.routing_accuracy` (the best
    scored LLM by `proba`); on sparse evidence (`Overlap.sparse`), where that ties every
    router, the `ips` estimate of the best LLM by `proba` among all."""
    t = np.asarray(truth, np.float64)
    if not overlap_of(t).sparse:
        return routing_accuracy(np.asarray(proba), t)
    return ips(np.argmax(np.asarray(proba, np.float64), axis=1), t).value
