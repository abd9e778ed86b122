"""An LLM onboarded from a few scores, read beside the pool: the P(correct) that
`locus.routing.stacked.StackedRouter` gives an LLM joined since the fit.

A newcomer's LOCUS embedding and its own votes rest on its few dozen scores; the fitted LLMs'
stacked P(correct) rests on thousands and knows how hard each query is. Measured on
leave-one-out fits (docs/decisions.md, "Newcomers"), the newcomer's own
P(correct) ranks its queries worse than the pool's mean prediction does and, beside the fitted
LLMs' sharper predictions, looks best on the hard queries: it made routing worse even with its
true accuracy and calibration given to it. `ThinEvidence` predicts its logit on a query from
eight readings,

    own     its LOCUS logit (its embedding read from its scores)
    task    the logit of its own task vote (its per-task rates), where the pool has tasks
    near    the logit of its own kNN vote over the stack's narrowest neighbourhood, shrunk
            towards LOCUS by the share of that neighbourhood its scores hold
            (`posterior_votes`): what its scores say near the query, once it has many
            (production outcomes)
    region  the same over the stack's widest neighbourhood
    mean    the fitted LLMs' mean stacked logit on the query: how hard the query is
    best    their largest: how well the pool answers it already
    factor  its logit by an MF model of the pool, its vector onboarded from its scores
            (`locus.routing.factors`; BFCL from 16 scores: AUROC 0.707, LOCUS's 0.666)
    ability the same by an IRT model (split2_model7: 0.718-0.728 against 0.713-0.715); each
            0 where the router has no such model

with weights fitted by `locus fit` on the fitted LLMs themselves made thin: each embedded from n
of its training scores, its validation scores the targets, for each n of `SIZES` (an LLM
with another number of scores gets weights interpolated in log n; the weights of its own
six readings kept >= 0: `_monotone_logistic`). The newcomer's level is its
own, not the fitted LLMs': its logits are shifted so that their mean P(correct) over queries
like its scored ones is what its own evidence says there, read against how easy the fitted LLMs
found the same queries (`level_shift`, `locus.routing.level`). The reading is for thin
evidence: as its scores grow (more probes, production outcomes) the stack's own reading of
them takes over (`FADE`: from 128 scores, all of it from 512 on).

    >>> import numpy as np
    >>> rows = ((1.0,) + (0.0,) * 7, (0.0,) * 4 + (1.0,) + (0.0,) * 3)
    >>> np.round(ThinEvidence((16, 64), rows, (0.0, 0.0)).coefficients(32)[0], 6).tolist()
    [0.5, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0]
    >>> round(level_shift(np.zeros(4), 0.5), 6)
    0.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from locus.calibration import fit_logistic, logit, sigmoid
from locus.errors import LocusInputError
from locus.routing.evidence import unit_rows
from locus.routing.posterior import posterior_votes

if TYPE_CHECKING:
    from locus.routing.evidence import Evidence
    from locus.routing.task_vote import TaskVote

__all__ = [
    "FACTOR_READINGS",
    "FEATURES",
    "SIZES",
    "FactorLogits",
    "ThinEvidence",
    "ThinLogits",
    "bounded_level",
    "fit_thin",
    "level_shift",
]

FEATURES = ("own", "task", "near", "region", "mean", "best", "factor", "ability")
# the readings of the LLM's own evidence: their weights are kept >= 0 (`_monotone_logistic`)
MONOTONE = ("own", "task", "near", "region", "factor", "ability")
# the readings of the factor models (`locus.routing.factors.READINGS`), in `FEATURES`' order
FACTOR_READINGS = ("factor", "ability")
# the readings an artifact of locus-stacked/3 has weights for
_BEFORE_FACTORS = FEATURES[:6]
# the evidence sizes the weights are fitted at: `locus onboard`'s probe counts
SIZES = (16, 32, 64, 128, 256)
# from how many scores on the stack's own reading of the LLM takes over, in log n: this
# reading alone up to the first, the stack's alone from the second (`ThinEvidence.share`).
# Measured on leave-one-out fits (docs/decisions.md, "Newcomers": the thin reading and
# the bound on its level): with many scores the stack's reading routes better
# (split2_model7's best LLM onboarded from 1,024: 36% of the queries and -1.3 points with this
# reading, 10% and +0.2 with the stack's); up to 128 probes, its own-evidence weights kept
# >= 0, this one does (newcomers suite at 128: BFCL AUROC 0.685 -> 0.707, MMLU-Pro's best LLM
# 0.7069 -> 0.7135, split2_model7's gain -0.0048 -> -0.0018)
FADE = (128, 512)
# fitted LLMs made thin per size (a sample of the pool's), draws of n scores per LLM, and the
# validation queries they are scored on: measured 3.3 s of a 45 s fit on MMLU-Pro (29 LLMs),
# 1.0 s on ZeroEval (55), 0.8 s on BFCL (71); the size 256 took MMLU-Pro's 0.8 s to 1.4 s
MAX_LLMS = 32
DRAWS = 2
MAX_QUERIES = 1_024
_CLIP = 1e-3  # a vote of 0 or 1 read as 0.001 or 0.999

# (evidence: one (query vectors (n_i, dq), scores (n_i,)) per LLM, query vectors (q, dq)) ->
# the logits (q, m) of LLMs embedded from each evidence (`LocusRouter.thin_logits`)
ThinLogits = Callable[
    [Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]], NDArray[np.float32]],
    NDArray[Any],
]
# (the pool's LLMs made thin, their evidence as `ThinLogits`', query vectors) -> per factor
# reading, their logits (q, m), each read by a part that never saw its scores
# (`Factors.thin_logits`)
FactorLogits = Callable[
    [
        Sequence[str],
        Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]],
        NDArray[np.float32],
    ],
    Mapping[str, NDArray[Any]],
]


def features(
    own: NDArray[Any],
    task: NDArray[Any] | None,
    votes: tuple[NDArray[Any], NDArray[Any]] | None,
    pool: NDArray[Any],
    factors: Mapping[str, NDArray[Any]] | None = None,
) -> NDArray[np.float64]:
    """(n_queries, 8) the readings of `FEATURES`: `own` (n,) logits, `task` (n,) task votes
    (None: none, read as 0), `votes` the kNN votes (n,) over the narrowest and the widest
    neighbourhood (None: none, read as 0), `pool` (n, n_fitted) the fitted LLMs' stacked
    logits, `factors` per reading of `FACTOR_READINGS` its logits (n,) (one not there: 0)."""
    p = np.asarray(pool, np.float64)
    zero = np.zeros(len(p))
    task_part = zero if task is None else logit(task, _CLIP)
    near, region = (
        (zero, zero) if votes is None else (logit(votes[0], _CLIP), logit(votes[1], _CLIP))
    )
    own_part = np.asarray(own, np.float64)
    given = factors or {}
    factor_parts = [np.asarray(given.get(name, zero), np.float64) for name in FACTOR_READINGS]
    return np.column_stack(
        [own_part, task_part, near, region, p.mean(axis=1), p.max(axis=1), *factor_parts]
    )


@dataclass(frozen=True)
class ThinEvidence:
    """The weights of a newcomer's readings (`FEATURES`), per evidence size.

    Attributes:
        sizes: the evidence sizes the weights were fitted at, ascending.
        weights: per size, one weight per reading of `FEATURES`.
        intercepts: per size, the fit's intercept (the level of the fitted LLMs made thin; a
            newcomer's own level replaces it: `level_shift`).
        fade: (from, to) scores: the reading's share of a newcomer's logit is 1 up to `from`,
            0 from `to` on, linear in log n between (`share`); the rest is the stack's own.
    """

    sizes: tuple[int, ...]
    weights: tuple[tuple[float, ...], ...]
    intercepts: tuple[float, ...]
    fade: tuple[int, int] = FADE

    def __post_init__(self) -> None:
        if not self.sizes or len(self.weights) != len(self.sizes):
            raise LocusInputError("thin evidence: one row of weights per evidence size")
        if len(self.intercepts) != len(self.sizes) or list(self.sizes) != sorted(self.sizes):
            raise LocusInputError("thin evidence: one intercept per size, sizes ascending")
        if any(len(row) != len(FEATURES) for row in self.weights):
            raise LocusInputError(f"thin evidence: {len(FEATURES)} weights per size")
        if not 0 < self.fade[0] <= self.fade[1]:
            raise LocusInputError(f"thin evidence: a fade of 0 < from <= to, found {self.fade}")

    def share(self, n: float) -> float:
        """The reading's share of the logit of an LLM of `n` scores (`fade`)."""
        start, stop = self.fade
        if n <= start:
            return 1.0
        if n >= stop:
            return 0.0
        return float(np.log(stop / n) / np.log(stop / start))

    def coefficients(self, n: float) -> tuple[NDArray[np.float64], float]:
        """(weights (8,), intercept) for an LLM of `n` scores: linear in log n between the
        fitted sizes, the nearest size's beyond them."""
        at = np.log(np.clip(float(n), self.sizes[0], self.sizes[-1]))
        grid = np.log(np.asarray(self.sizes, np.float64))
        table = np.asarray(self.weights, np.float64)
        weights = np.array([np.interp(at, grid, table[:, i]) for i in range(table.shape[1])])
        return weights, float(np.interp(at, grid, np.asarray(self.intercepts, np.float64)))

    def logits(
        self,
        own: NDArray[Any],
        task: NDArray[Any] | None,
        votes: tuple[NDArray[Any], NDArray[Any]] | None,
        pool: NDArray[Any],
        n: float,
        factors: Mapping[str, NDArray[Any]] | None = None,
    ) -> NDArray[np.float64]:
        """(n_queries,) a newcomer's logits, before its level shift, from its readings
        (`features`) and its number of scores `n`."""
        weights, intercept = self.coefficients(n)
        return features(own, task, votes, pool, factors) @ weights + intercept

    def as_dict(self) -> dict[str, Any]:
        return {
            "features": list(FEATURES),
            "sizes": list(self.sizes),
            "weights": [list(row) for row in self.weights],
            "intercepts": list(self.intercepts),
            "fade": list(self.fade),
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> ThinEvidence:
        """Read `as_dict`'s value; one of the readings before the factor readings (written
        before locus-stacked/4) reads with weights of 0 for them."""
        names = list(value.get("features", FEATURES))
        if names not in (list(FEATURES), list(_BEFORE_FACTORS)):
            raise LocusInputError(f"thin evidence: readings {value.get('features')} unknown")
        missing = len(FEATURES) - len(names)
        return cls(
            sizes=tuple(int(n) for n in value["sizes"]),
            weights=tuple(
                tuple(float(w) for w in row) + (0.0,) * missing for row in value["weights"]
            ),
            intercepts=tuple(float(b) for b in value["intercepts"]),
            fade=(int(value["fade"][0]), int(value["fade"][1])),
        )


def _vote(
    queries: NDArray[Any],
    vectors: NDArray[Any],
    scores: NDArray[Any],
    k: int,
    prior: NDArray[Any],
    fit_rows: int,
    strength: float,
) -> NDArray[np.float64]:
    """(n_queries,) an LLM's kNN vote at `k` from its `scores` on queries of `vectors`, as a
    joined LLM's is read: the mean of the scores of its k queries nearest each of `queries`
    (unit rows; cosine; all of them where it has at most k), shrunk towards `prior` (n_queries,)
    as `StackedRouter` shrinks it (k n / N scores of its own against `strength`, N the
    `fit_rows`)."""
    values = np.asarray(scores, np.float64)
    if k >= len(values):
        means = np.full(len(queries), values.mean())
    else:
        similarity = np.asarray(queries) @ unit_rows(np.asarray(vectors, np.float32)).T
        nearest = np.argpartition(-similarity, k - 1, axis=1)[:, :k]
        means = values[nearest].mean(axis=1)
    count = min(len(values), k * len(values) / max(fit_rows, 1))
    return posterior_votes(means[:, None], prior[:, None], np.array([count]), strength)[:, 0]


def level_shift(logits: NDArray[Any], target: float) -> float:
    """The shift a such that the mean of sigmoid(`logits` + a) is `target` (clipped to
    [0.001, 0.999]): a newcomer's level put where its own evidence says."""
    from scipy.optimize import brentq

    z = np.asarray(logits, np.float64).reshape(-1)
    if not len(z):
        return 0.0
    goal = float(np.clip(target, 1e-3, 1 - 1e-3))
    return float(brentq(lambda a: float(sigmoid(z + a).mean()) - goal, -40.0, 40.0, xtol=1e-6))


def bounded_level(level: float, n: float) -> float:
    """A newcomer's `level` (its mean P(correct)) kept within [1/2, n + 1/2] / (n + 1): no
    surer than `n` scores all one way can make it ((n + 1/2) / (n + 1) is their mean under the
    Jeffreys prior): 32 probes all right (a mean of 1; read as P 0.999, BFCL's log-loss was
    0.54-0.96 against 0.24-0.38 with all its scores, 4 of 84 newcomers). Inside, kept as it is.

    >>> round(bounded_level(0.999, 32), 4), bounded_level(0.7, 32)
    (0.9848, 0.7)
    """
    bound = 0.5 / (float(n) + 1.0)
    return float(np.clip(level, bound, 1.0 - bound))


def _monotone_logistic(
    x: NDArray[np.float64], y: NDArray[np.float64]
) -> tuple[tuple[float, ...], float]:
    """(weights, intercept) of an L2-penalised logistic regression of scores `y` (n,) in [0, 1]
    (s counts as s successes and 1 - s failures) on readings `x` (n, 8) of `FEATURES`, the
    weights of the LLM's own readings (`MONOTONE`) kept >= 0.

    The vote readings move with the LLM's LOCUS logit (each is its votes shrunk towards it);
    unconstrained, the fit reads signal from their differences with large offsetting weights
    (BFCL: own +2.1, near +1.3, region -3.3), which turns the ranking around where the votes
    carry nothing of their own: an LLM whose probes were all right (every vote 1, each reading
    then LOCUS's logit bent alike) had its queries ranked at AUROC 0.33 against its LOCUS
    logit's 0.70. More of the LLM's own evidence never lowers its reading."""
    d = x.shape[1]
    bounds = [(0.0, None) if name in MONOTONE else (None, None) for name in FEATURES]
    found = fit_logistic(
        np.hstack([x, np.ones((len(x), 1))]),  # the last weight: an unpenalised intercept
        y,
        strength=np.append(np.ones(d), 0.0),
        bounds=[*bounds, (None, None)],
        max_iterations=1_000,
    )
    return tuple(float(w) for w in found[:d]), float(found[d])


def fit_thin(
    thin_logits: ThinLogits,
    train: Evidence,
    val_vectors: NDArray[np.float32],
    val_scores: NDArray[np.floating[Any]],
    val_stacked: NDArray[np.floating[Any]],
    *,
    task_vote: TaskVote | None = None,
    val_shares: NDArray[np.floating[Any]] | None = None,
    vote_ks: tuple[int, int] | None = None,
    prior_strength: float = 32.0,
    factor_logits: FactorLogits | None = None,
    sizes: Sequence[int] = SIZES,
    seed: int = 0,
) -> ThinEvidence | None:
    """The weights of `ThinEvidence`, fitted on the fitted LLMs made thin.

    For each size n and each of up to `MAX_LLMS` LLMs, `DRAWS` draws of n of its training
    scores (`train`, columns as `val_scores`'); each draw embedded (`thin_logits`) and read on
    the validation queries (`val_vectors`, at most `MAX_QUERIES` of them) beside the other
    LLMs' stacked logits there (`val_stacked`); a logistic regression of the LLM's validation
    scores on the readings (a score s counts as s successes and 1 - s failures).
    `task_vote` and `val_shares` (n_val, n_tasks + 1), the validation queries' task shares
    (`KNNRouter.task_shares`): the task reading, else none. `vote_ks`: the stack's narrowest
    and widest neighbourhood, where the vote readings are its kNN votes there (the mean of its
    scores on the k of its scored queries nearest the query, by cosine) shrunk towards LOCUS
    as `StackedRouter` shrinks a joined LLM's (`prior_strength` scores against k n / N of its
    own, N the training queries); None: no vote readings. `factor_logits`: the factor
    readings of each draw (`Factors.thin_logits`), else none. None where the pool is too small
    to fit on (fewer than three LLMs, or no size with a scored validation cell).
    """
    scores = np.asarray(val_scores, np.float64)
    stacked = np.asarray(val_stacked, np.float64)
    n_llms = scores.shape[1]
    if n_llms < 3 or stacked.shape != scores.shape:
        return None
    rng = np.random.default_rng(seed)
    queries = np.arange(len(scores))
    if len(queries) > MAX_QUERIES:
        queries = np.sort(rng.choice(len(queries), MAX_QUERIES, replace=False))
    vectors, scores, stacked = np.asarray(val_vectors)[queries], scores[queries], stacked[queries]
    shares = None if val_shares is None else np.asarray(val_shares, np.float64)[queries]
    unit_queries = unit_rows(vectors)
    llms = np.sort(rng.choice(n_llms, min(n_llms, MAX_LLMS), replace=False))
    train_scores = np.asarray(train.scores, np.float32)
    fitted: list[tuple[int, tuple[float, ...], float]] = []
    for size in sorted(set(int(n) for n in sizes)):
        draws: list[tuple[int, NDArray[np.int64]]] = []
        for j in llms:
            scored = np.flatnonzero(~np.isnan(train_scores[:, j]))
            if len(scored) >= 2 * size and (~np.isnan(scores[:, j])).any():
                draws += [(int(j), rng.choice(scored, size, replace=False)) for _ in range(DRAWS)]
        if not draws:
            continue
        evidence = [(train.vectors[rows], train_scores[rows, j]) for j, rows in draws]
        own = np.asarray(thin_logits(evidence, vectors), np.float64)
        factor: Mapping[str, NDArray[Any]] = {}
        if factor_logits is not None:
            factor = factor_logits([train.llm_ids[j] for j, _ in draws], evidence, vectors)
        rows_x, rows_y = [], []
        for i, (j, rows) in enumerate(draws):
            truth = scores[:, j]
            kept = ~np.isnan(truth)
            task = None
            if task_vote is not None and shares is not None and train.tasks:
                rates = task_vote.rates_of(train_scores[rows, j], [train.tasks[r] for r in rows])
                task = shares @ rates
            votes = None
            if vote_ks is not None:
                prior = sigmoid(own[:, i])
                near, region = (
                    _vote(unit_queries, train.vectors[rows], train_scores[rows, j], k, prior,
                          len(train_scores), prior_strength)
                    for k in vote_ks
                )  # fmt: skip
                votes = (near, region)
            others = np.delete(stacked, j, axis=1)
            readings = {name: logits[:, i] for name, logits in factor.items()}
            rows_x.append(features(own[:, i], task, votes, others, readings)[kept])
            rows_y.append(truth[kept])
        weights, intercept = _monotone_logistic(np.vstack(rows_x), np.concatenate(rows_y))
        fitted.append((size, weights, intercept))
    if not fitted:
        return None
    return ThinEvidence(
        sizes=tuple(size for size, _, _ in fitted),
        weights=tuple(weights for _, weights, _ in fitted),
        intercepts=tuple(intercept for _, _, intercept in fitted),
    )
