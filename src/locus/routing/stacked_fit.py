"""How `locus.routing.stacked.StackedRouter` is fitted: the recipe behind `StackedRouter.fit`
and `StackedRouter.fit_thin`, apart from the router that routes with what they choose. It
returns the router's parts; it never builds the router (the router's module imports this
one, not the other way round).

    fit_stacked        the kNN router, the stack and the guard on training and validation
                       evidence (out of fold on a small validation split)
    fit_thin_reading   `locus.routing.thin.fit_thin` on a fitted router's own parts, and the
                       factor models its factor readings onboard newcomers in
    fit_locus_knn_stack  the stack on a large enough validation split, from the kNN votes
                       (`knn_votes`, `knn_task_votes`)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from locus.calibration import sigmoid
from locus.errors import LocusInputError
from locus.routing.cross_fit import cross_fitted_parts
from locus.routing.evidence import Evidence
from locus.routing.factors import Factors
from locus.routing.guard import Guard, fit_default_guard
from locus.routing.locus_router import LogitRouter
from locus.routing.neighbours import KNNRouter
from locus.routing.stack import STACK_KS, Stack, base_rate_shift, fit_stack
from locus.routing.task_vote import TASK_K
from locus.routing.thin import MAX_QUERIES as THIN_MAX_QUERIES
from locus.routing.thin import ThinEvidence, ThinLogits, fit_thin

__all__ = [
    "LEARN_MIN_PER_LLM",
    "STACK_MAX_CELLS",
    "STACK_MIN_ROWS",
    "StackParts",
    "fit_locus_knn_stack",
    "fit_stacked",
    "fit_thin_reading",
    "knn_task_votes",
    "knn_votes",
    "learns_from",
]

# The stack, the kNN router's k and the guard are a handful of numbers, fitted on the kNN votes
# of at most this many (query, LLM) cells per split. A query's votes cost a search of every
# training query for every LLM: at 1,000 LLMs x 80,000 training queries, the votes of every
# training and validation query took longer than the whole fit may (benchmarks/README.md,
# "Leaderboard scale"). The developers' pools (at most 49 LLMs x 9,600 training queries) are
# under the bound, fitted on every query as before. (`StackedRouter.fit`'s defaults.)
STACK_MAX_CELLS = 2_000_000
STACK_MIN_ROWS = 2_048
# the (query, LLM) cells at most the factor models of a newcomer's readings train on
# (`fit_thin_reading`; a sample of the training queries beyond)
FACTOR_MAX_CELLS = 500_000
# below this many scored training queries for some LLM, the networks have too little to learn
# which LLM suits which query from: the LLMs' own votes route (`fit_stacked`)
LEARN_MIN_PER_LLM = 50


def learns_from(train_scores: NDArray[np.floating[Any]]) -> bool:
    """Whether every LLM has `LEARN_MIN_PER_LLM` scored queries in `train_scores`
    (n_queries, n_llms): enough for LOCUS to have a say in the routing."""
    counts = (~np.isnan(np.asarray(train_scores, np.float64))).sum(axis=0)
    return bool(len(counts) and counts.min() >= LEARN_MIN_PER_LLM)


@dataclass(frozen=True)
class StackParts:
    """What `fit_stacked` chose: the kNN router, the stack and the guard (None, None: LOCUS
    alone), and the validation evidence the reading of a newcomer is fitted on (None where the
    stack was chosen out of fold: no held-out split to fit it on)."""

    knn: KNNRouter | None = None
    stack: Stack | None = None
    guard: Guard | None = None
    thin_val: Evidence | None = None


class FittedRouter(Protocol):
    """What `fit_thin_reading` reads of a fitted router (`StackedRouter`)."""

    locus: LogitRouter
    knn: KNNRouter | None
    stack: Stack | None
    prior_strength: float

    @property
    def llm_ids(self) -> Sequence[str]: ...

    def predict_logits(
        self, query_vectors: NDArray[np.float32], tasks: Sequence[str | None] | None = None
    ) -> NDArray[np.float64]: ...


def fit_stacked(
    locus: LogitRouter,
    train: Evidence,
    val: Evidence,
    *,
    knn: KNNRouter | None,
    stacked: bool,
    use_locus: bool | None,
    cross_fit_below: int,
    max_cells: int,
    min_rows: int,
    ann_from: int,
) -> StackParts:
    """`StackedRouter.fit`'s parts: a fitted LOCUS stacked with a kNN router, and the guard,
    chosen on `train` and `val`.

    The kNN router (`knn`, else one fitted on `train` with its k chosen on `val`), then the
    stack's weights on the validation cells and its base rate over both splits
    (`fit_locus_knn_stack`), then the guard on the stacked validation
    P(correct) (`fit_default_guard`). Without `stacked`, or without a scored validation
    cell, LOCUS alone (and its guard, where validation allows one). On a pool larger than
    `STACK_MAX_CELLS` cells per split, the votes, the stack and the guard are read on a
    fixed random sample of each split's queries; the kNN router keeps every training query.
    With fewer than `cross_fit_below` scored validation cells, the stack and the guard are
    chosen on out-of-fold votes over the training and validation queries together, and the
    kNN router keeps both (`locus.routing.cross_fit`; a `knn` given is not used then).
    Without `use_locus` (by default: where some LLM has fewer than `LEARN_MIN_PER_LLM`
    scored training queries, too few for the networks to learn from), LOCUS has no say in
    which LLM a query goes to: the evidence's own votes decide, chosen the same way.

    Raises:
        LocusInputError: evidence over other LLMs than LOCUS's pool.
    """
    ids = list(locus.llm_ids)
    reference = train
    trained_on = _columns(train, ids)  # the guard's default: the best LLM on all of them
    if use_locus is None:
        use_locus = learns_from(trained_on)
    val_cells = int((~np.isnan(_columns(val, ids))).sum())
    if not val_cells:
        return StackParts()
    if stacked and (val_cells < cross_fit_below or not use_locus):
        scored = train.joined(val)
        return StackParts(
            *cross_fitted_parts(
                locus.predict_logits(scored.vectors),
                scored,
                _columns(scored, ids),
                trained_on,
                ids,
                use_locus=use_locus,
                ann_from=ann_from,
            )
        )
    # every training query stays a neighbour; the votes are read on a bounded sample
    limit = max(min_rows, max_cells // max(len(ids), 1))
    train, val = _bounded(train, limit, "train"), _bounded(val, limit, "val")
    truth = {split: _columns(e, ids) for split, e in (("train", train), ("val", val))}
    val_logits = locus.predict_logits(val.vectors)
    stack: Stack | None = None
    if stacked:
        knn = knn or KNNRouter(ann_from=ann_from).fit(reference, val)
        needed = sorted({*STACK_KS, knn.k_})
        logits = {"train": locus.predict_logits(train.vectors), "val": val_logits}
        votes = {
            "train": knn_votes(knn, train.vectors, ids, needed),
            "val": knn_votes(knn, val.vectors, ids, needed),
        }
        task_votes = None
        if knn.has_task_vote:  # the training queries carry tasks
            task_votes = {
                split: knn_task_votes(knn, evidence.vectors, ids)
                for split, evidence in (("train", train), ("val", val))
            }
        stack = fit_locus_knn_stack(logits, votes, truth, mix_k=knn.k_, task_votes=task_votes)
        val_tasks = None if task_votes is None else task_votes["val"]
        val_proba = sigmoid(stack.logits(val_logits, votes["val"], val_tasks))
    else:  # LOCUS alone: the training queries' logits are not needed
        knn, val_proba = None, sigmoid(val_logits)
    guard = fit_default_guard(val_proba, trained_on, truth["val"], ids)
    return StackParts(knn, stack, guard, val)


def fit_thin_reading(
    router: FittedRouter,
    train: Evidence,
    val: Evidence,
    thin_logits: ThinLogits | None = None,
    *,
    factors: Factors | bool = False,
) -> tuple[ThinEvidence | None, Factors | None]:
    """`StackedRouter.fit_thin`: how an LLM joined since the fit is read beside the fitted
    LLMs (`locus.routing.thin.fit_thin`; `thin_logits` embeds them, by default the torch
    LOCUS's `LocusRouter.thin_logits`), and the factor models it reads them in: `factors`
    themselves, fitted on `train` and `val` (True), or none (False). (None, None) without a
    way to embed (a numpy LOCUS), a stack, or three LLMs."""
    reader = thin_logits or getattr(router.locus, "thin_logits", None)
    if reader is None or router.stack is None or router.knn is None or len(router.llm_ids) < 3:
        return None, None
    ids = list(router.locus.llm_ids)
    train = Evidence(train.vectors, _columns(train, ids).astype(np.float32), tuple(ids),
                     train.tasks)  # fmt: skip
    model: Factors | None = None
    if isinstance(factors, Factors):
        model = factors
    elif factors:
        # their training is bounded in cells: at 80,000 queries x 1,000 LLMs an epoch alone
        # would be 39,000 steps (the developers' pools, at most 275,000 cells, are under it)
        limit = max(THIN_MAX_QUERIES, FACTOR_MAX_CELLS // len(ids))
        val_scores = _columns(val, ids).astype(np.float32)
        model = Factors.fit(
            _bounded(train, limit, "factors"),
            _bounded(Evidence(val.vectors, val_scores, tuple(ids)), limit, "factors-val"),
        )
    if model is not None and sorted(model.llm_ids) != sorted(ids):
        raise LocusInputError("a stacked router's factor model must cover its pool's LLMs")
    val = _bounded(val, THIN_MAX_QUERIES, "thin")
    tasks = router.stack.tasks and router.knn.has_task_vote
    ks = router.stack.ks
    thin = fit_thin(
        reader,
        train,
        val.vectors,
        _columns(val, ids),
        router.predict_logits(val.vectors),
        task_vote=router.knn.task_vote_ if tasks else None,
        val_shares=router.knn.task_shares(val.vectors) if tasks else None,
        vote_ks=(min(ks), max(ks)) if ks else None,
        prior_strength=router.prior_strength,
        factor_logits=None if model is None else model.thin_logits,
    )
    return thin, model if thin is not None else None


def _bounded(evidence: Evidence, limit: int, split: str) -> Evidence:
    """At most `limit` of `evidence`'s queries, drawn at random with a fixed seed; all of them
    when they fit."""
    if evidence.n_queries <= limit:
        return evidence
    rng = np.random.default_rng([0, len(split)])
    return evidence.take(np.sort(rng.choice(evidence.n_queries, size=limit, replace=False)))


def _columns(evidence: Evidence, llm_ids: Sequence[str]) -> NDArray[np.float64]:
    """The evidence's scores (n_queries, n_llms) in the order of `llm_ids`."""
    missing = sorted(set(llm_ids) - set(evidence.llm_ids))
    if missing:
        raise LocusInputError(
            f"a stacked router needs evidence on every LLM of LOCUS's pool; {missing[0]!r} has none"
        )
    order = [list(evidence.llm_ids).index(llm) for llm in llm_ids]
    return np.asarray(evidence.scores, dtype=np.float64)[:, order]


def knn_votes(
    knn: KNNRouter, query_vectors: NDArray[np.float32], llm_ids: Sequence[str], ks: Sequence[int]
) -> dict[int, NDArray[np.float32]]:
    """{k: the kNN router's P(correct) (n_queries, n_llms) at k}, columns in `llm_ids`' order,
    every k from one neighbour search."""
    columns = [list(knn.llm_ids).index(llm) for llm in llm_ids]
    return knn.votes(query_vectors, ks).columns(columns).by_k


def knn_task_votes(
    knn: KNNRouter, query_vectors: NDArray[np.float32], llm_ids: Sequence[str]
) -> NDArray[np.float32]:
    """The kNN router's task votes (n_queries, n_llms), columns in `llm_ids`' order
    (`locus.routing.task_vote`; the router's training queries must have carried tasks)."""
    columns = [list(knn.llm_ids).index(llm) for llm in llm_ids]
    found = knn.votes(query_vectors, [TASK_K], tasks=True).columns(columns).tasks
    assert found is not None  # asked for
    return found


def fit_locus_knn_stack(
    logits: Mapping[str, NDArray[Any]],
    votes: Mapping[str, Mapping[int, NDArray[Any]]],
    truth: Mapping[str, NDArray[Any]],
    *,
    mix_k: int,
    task_votes: Mapping[str, NDArray[Any]] | None = None,
) -> Stack:
    """The stack `locus fit` keeps, from LOCUS's calibrated logits, the kNN votes (`knn_votes`
    at `STACK_KS` and `mix_k`), the task votes where the queries carry tasks
    (`knn_task_votes`) and the scores of the "train" and "val" splits: `fit_stack` on
    validation, then the `base_rate_shift` over both splits."""
    tasks = task_votes or {}
    stack = fit_stack(
        logits["val"], votes["val"], truth["val"], mix_k=mix_k, task_votes=tasks.get("val")
    )
    both = np.concatenate(
        [stack.logits(logits[s], votes[s], tasks.get(s)) for s in ("train", "val")]
    )
    return replace(
        stack, shift=base_rate_shift(both, np.concatenate([truth["train"], truth["val"]]))
    )
