"""Exploration: a bounded share of queries routed by a Thompson draw on each candidate's
uncertainty, so that an LLM the router is unsure of gets the outcomes that would correct it.

A router's P(correct) for an LLM rests on some number of scores (`RankedLLM.uncertainty`, the
standard deviation of a Beta posterior: `locus.routing.posterior.spread`). Routing by the mean
alone, an LLM whose prediction is too low is rarely chosen and so rarely scored: production
outcomes never come for it. With exploration, a query is explored with probability `share`:
each plausible candidate's P(correct) is drawn from its Beta posterior and the query goes to the
best draw (utility: the draw less the candidate's cost term). Plausible means its utility
(its mean, less its cost term under a cost rule) plus `reach` standard deviations reaches the
best candidate's: an LLM surely worse is never tried, and an LLM known from hundreds of scores
is drawn close to its mean. Off by default (`share` 0); the gateway takes a server-wide share
and a per-request override.

    >>> import numpy as np
    >>> p = np.array([[0.80, 0.70, 0.20]])
    >>> sd = np.array([[0.01, 0.10, 0.01]])
    >>> rng = np.random.default_rng(0)
    >>> picks = [int(Exploration(share=1.0).choose(p, sd, rng)[0]) for _ in range(200)]
    >>> sorted(set(picks))   # the third is surely worse: never tried
    [0, 1]
    >>> Exploration().choose(p, sd, rng).tolist()   # off: the best mean
    [0]
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.routing.router import RankedLLM

__all__ = ["EXPLORE_REACH", "PROPENSITY_DRAWS", "Exploration"]

# how many standard deviations above its mean an LLM's P(correct) may plausibly lie: 2 keeps
# an LLM whose prediction could be the best at ~2.5% one-sided, and no worse one
EXPLORE_REACH = 2.0
# Thompson draws that estimate an explored choice's probability (`Exploration.propensities`):
# a probability of 0.01 is read within +-0.003 (one standard error)
PROPENSITY_DRAWS = 1024


@dataclass(frozen=True)
class Exploration:
    """Route a share of queries by a Thompson draw among the plausible candidates.

    Attributes:
        share: the probability that a query is explored, in [0, 1]; 0 is off.
        reach: standard deviations above its mean a candidate's P(correct) may lie and still
            be drawn among (> 0).

    Raises:
        LocusInputError: a share outside [0, 1], or a reach that is not a number > 0.
    """

    share: float = 0.0
    reach: float = EXPLORE_REACH

    def __post_init__(self) -> None:
        if isinstance(self.share, bool) or not (
            isinstance(self.share, int | float) and 0 <= self.share <= 1
        ):
            raise LocusInputError(
                f"explore must be a share of queries in [0, 1] (0.05: one query in 20 explored), "
                f"found {self.share!r}"
            )
        if not (isinstance(self.reach, int | float) and math.isfinite(self.reach)) or not (
            self.reach > 0
        ):
            raise LocusInputError(f"explore reach must be a number > 0, found {self.reach!r}")

    def choose(
        self,
        proba: NDArray[np.floating[Any]],
        uncertainty: NDArray[np.floating[Any]],
        rng: np.random.Generator,
        utility: NDArray[np.floating[Any]] | None = None,
        first: NDArray[np.integer[Any]] | None = None,
    ) -> NDArray[np.int64]:
        """(n_queries,) the column each query goes to: `first` (default: the best `utility`,
        itself P(correct) by default), or, on an explored query, the best drawn P(correct)
        less the same cost term among the plausible candidates (those whose utility plus
        `reach` standard deviations reaches the best utility). Arrays (n_queries, n_llms); an
        uncertainty of NaN or 0: that candidate is drawn at its mean; a utility of -inf: never
        chosen."""
        p = np.asarray(proba, np.float64)
        sd = np.nan_to_num(np.asarray(uncertainty, np.float64), nan=0.0)
        value = p if utility is None else np.asarray(utility, np.float64)
        chosen = np.argmax(value, axis=1) if first is None else np.array(first, np.int64)
        if self.share == 0 or p.size == 0:
            return chosen
        explored = np.flatnonzero(rng.random(len(p)) < self.share)
        if not len(explored):
            return chosen
        p, sd, value = p[explored], sd[explored], value[explored]
        allowed = np.isfinite(value)
        best = np.where(allowed, value, -np.inf).max(axis=1, keepdims=True)
        plausible = allowed & (value + self.reach * sd >= best - 1e-12)
        drawn = _beta_draws(p, sd, rng) - (p - value)  # the draw, less each cost term
        chosen[explored] = np.argmax(np.where(plausible, drawn, -np.inf), axis=1)
        return chosen

    def propensities(
        self,
        proba: NDArray[np.floating[Any]],
        uncertainty: NDArray[np.floating[Any]],
        utility: NDArray[np.floating[Any]] | None = None,
        first: NDArray[np.integer[Any]] | None = None,
        *,
        draws: int = PROPENSITY_DRAWS,
        seed: int = 0,
    ) -> NDArray[np.float64]:
        """(n_queries, n_llms) the probability that `choose` (same arguments) sends each query
        to each column: 1 - share on its first choice, plus share x the Monte Carlo frequency
        (`draws` Thompson draws) with which each plausible candidate wins the draw. What a
        log needs for off-policy estimates (`locus.offpolicy`) of other routers' hit@1.

        >>> p, sd = np.array([[0.80, 0.70, 0.20]]), np.array([[0.01, 0.10, 0.01]])
        >>> found = Exploration(share=0.1).propensities(p, sd)
        >>> round(float(found.sum()), 6), bool(found[0, 0] >= 0.9), float(found[0, 2])
        (1.0, True, 0.0)
        """
        p = np.asarray(proba, np.float64)
        value = p if utility is None else np.asarray(utility, np.float64)
        chosen = np.argmax(value, axis=1) if first is None else np.asarray(first, np.int64)
        out = np.zeros_like(p)
        out[np.arange(len(p)), chosen] = 1.0 - self.share
        if self.share == 0 or p.size == 0:
            out[np.arange(len(p)), chosen] = 1.0
            return out
        sd = np.nan_to_num(np.asarray(uncertainty, np.float64), nan=0.0)
        allowed = np.isfinite(value)
        best = np.where(allowed, value, -np.inf).max(axis=1, keepdims=True)
        plausible = allowed & (value + self.reach * sd >= best - 1e-12)
        rng = np.random.default_rng(seed)
        for row in range(len(p)):
            many = np.repeat(p[row][None], draws, axis=0)
            spread = np.repeat(sd[row][None], draws, axis=0)
            drawn = _beta_draws(many, spread, rng) - (p[row] - value[row])
            winners = np.argmax(np.where(plausible[row], drawn, -np.inf), axis=1)
            out[row] += self.share * np.bincount(winners, minlength=p.shape[1]) / draws
        return out

    def reorder(
        self, ranked: Sequence[RankedLLM], rng: np.random.Generator
    ) -> tuple[list[RankedLLM], bool]:
        """A fallback order (best first) with the explored choice first and the others in
        their order behind it, and whether the query was routed by a draw to another LLM than
        the first. Candidates without a P(correct) (NaN: a pinned LLM) are never explored."""
        order = list(ranked)
        if self.share == 0 or len(order) < 2 or any(math.isnan(c.p_correct) for c in order):
            return order, False
        p = np.array([[c.p_correct for c in order]])
        sd = np.array([[np.nan if c.uncertainty is None else c.uncertainty for c in order]])
        utility = np.array([[c.utility for c in order]])
        # the first is the router's choice (a guard may have held it above a higher utility)
        pick = int(self.choose(p, sd, rng, utility, first=np.zeros(1, np.int64))[0])
        if pick == 0:
            return order, False
        return [order[pick], *order[:pick], *order[pick + 1 :]], True

    def propensity(self, ranked: Sequence[RankedLLM], llm_id: str) -> float | None:
        """The probability that `reorder(ranked)` puts `llm_id` first (`propensities` over
        the candidates, the router's choice first); None where a candidate has no P(correct)
        (a pinned LLM) or `llm_id` is not among them."""
        order = list(ranked)
        index = next((i for i, c in enumerate(order) if c.llm_id == llm_id), None)
        if index is None or any(math.isnan(c.p_correct) for c in order):
            return None
        if self.share == 0 or len(order) < 2:
            return 1.0 if index == 0 else 0.0
        p = np.array([[c.p_correct for c in order]])
        sd = np.array([[np.nan if c.uncertainty is None else c.uncertainty for c in order]])
        utility = np.array([[c.utility for c in order]])
        found = self.propensities(p, sd, utility, first=np.zeros(1, np.int64))
        return float(found[0, index])

    def with_share(self, share: float | None) -> Exploration:
        """This exploration with another share (a request's override); None keeps it."""
        return self if share is None else dataclasses.replace(self, share=share)


def _beta_draws(
    p: NDArray[np.float64], sd: NDArray[np.float64], rng: np.random.Generator
) -> NDArray[np.float64]:
    """One draw per cell from the Beta distribution of mean `p` and standard deviation `sd`
    (the posterior the uncertainty describes); `p` itself where `sd` is 0 or too wide for a
    Beta of that mean (sd^2 >= p (1 - p))."""
    mean = np.clip(p, 1e-6, 1 - 1e-6)
    variance = np.square(sd)
    concentration = np.where(
        variance > 0, mean * (1 - mean) / np.maximum(variance, 1e-300) - 1, 0.0
    )
    drawable = concentration > 0
    out = p.copy()
    if drawable.any():
        c = concentration[drawable]
        out[drawable] = rng.beta(mean[drawable] * c, (1 - mean[drawable]) * c)
    return out
