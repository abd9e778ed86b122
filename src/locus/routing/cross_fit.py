"""Out-of-fold kNN votes: what the stack and the guard are chosen on when validation is small.

The stack's weights and the guard's margin are a handful of numbers, chosen on validation
cells. A pool of a few hundred queries has a validation split of a few dozen: 20 queries x 4
LLMs chose "every query to the best single LLM" on a pool where the best LLM per task routed 30
points better, because 20 queries cannot show a gain beyond noise. Below `CROSS_FIT_CELLS`
scored validation cells, `StackedRouter.fit` reads the votes of every training and validation
query instead, each from a kNN router fitted on the other folds (`out_of_fold_votes`): every
query is a held-out query once, and the stack and guard are chosen on all of them. The kNN
router kept for routing is then fitted on every scored query.

LOCUS's networks were trained on the training queries, so its logits there are in-sample (on a
4-LLM x 200-query pool: AUROC 0.76 on training queries, 0.61 on validation ones): fitted on
them, the stack gave LOCUS a deviation weight of 4.4 and P(correct) 0.96 to an LLM whose rate
is 0.90. `fit_cross_fitted_stack` therefore fits the evidence's parts on every query's
out-of-fold votes, and LOCUS's share (its level mixture and its deviation weight) on the
validation queries only, the only ones it has not seen, and only as far as they show it
helps beyond noise. Where the queries carry tasks, the level may read the task vote instead of
a vote of a few neighbours (whichever has the lower out-of-fold log-loss): the kNN vote at the
k that routes best (5 neighbours on one seed of that pool) gave the level an out-of-fold
log-loss of 0.95 against the task vote's 0.62.

    >>> import numpy as np
    >>> vectors = np.repeat(np.eye(2, dtype=np.float32), 10, axis=0)
    >>> scores = np.repeat(np.array([[1, 0], [0, 1]], dtype=np.float32), 10, axis=0)
    >>> votes, _ = out_of_fold_votes(Evidence(vectors, scores, ("a", "b")), [5])
    >>> votes[5][0].tolist(), votes[5][-1].tolist()
    ([1.0, 0.0], [0.0, 1.0])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.calibration import sigmoid
from locus.errors import LocusInputError
from locus.metrics import logit_log_loss, query_log_losses
from locus.offpolicy import selection_hit
from locus.routing.ann import ANN_FROM
from locus.routing.evidence import Evidence
from locus.routing.guard import Guard, fit_default_guard
from locus.routing.neighbours import KNNRouter
from locus.routing.stack import (
    STACK_KS,
    Stack,
    base_rate_shift,
    choose_level,
    fit_stack,
    knn_logits,
)

__all__ = [
    "CROSS_FIT_CELLS",
    "FOLDS",
    "LOCUS_WEIGHTS",
    "LOCUS_Z",
    "PENALTIES",
    "cross_fitted_parts",
    "fit_cross_fitted_stack",
    "fold_of",
    "out_of_fold_votes",
]

# below this many scored validation cells the stack and the guard are chosen out of fold over
# the training and validation queries together (the developers' pools have 5,600 to 34,000)
CROSS_FIT_CELLS = 1_000
FOLDS = 5
# LOCUS's deviation weight beside the evidence's parts, chosen on validation queries
# (`_locus_share`: none unless they show it helps)
LOCUS_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
# the standard errors of validation gain LOCUS's share must show (`_locus_share`)
LOCUS_Z = 2.0
# the evidence's deviation weights' pull towards the task vote alone, chosen by
# cross-validation over queries (`_fit_evidence`)
PENALTIES = (1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0)


def fold_of(n_queries: int, folds: int = FOLDS, seed: int = 0) -> NDArray[np.int64]:
    """(n_queries,) each query's fold in 0..folds-1: a seeded permutation, sizes within one."""
    if n_queries < folds:
        raise LocusInputError(f"{folds} folds need at least {folds} queries, found {n_queries}")
    return np.random.default_rng(seed).permutation(n_queries) % folds


def out_of_fold_votes(
    evidence: Evidence, ks: Sequence[int], *, folds: int = FOLDS, seed: int = 0
) -> tuple[dict[int, NDArray[np.float32]], NDArray[np.float32] | None]:
    """({k: P(correct) (n_queries, n_llms) at k}, the task votes or None) for every query of
    `evidence`, each from a kNN router fitted on the queries of the other folds; the task
    votes where the queries carry at least two tasks, read from a query's neighbours' tasks.
    Columns in `evidence.llm_ids`' order.

    Raises:
        LocusInputError: fewer queries than folds.
    """
    fold = fold_of(evidence.n_queries, folds, seed)
    wanted = [int(k) for k in ks]
    votes = {k: np.empty(evidence.scores.shape, np.float32) for k in wanted}
    tasks = len({t for t in evidence.tasks if t is not None}) >= 2
    task_votes = np.empty(evidence.scores.shape, np.float32) if tasks else None
    for f in range(folds):
        held = np.flatnonzero(fold == f)
        rest = evidence.take(np.flatnonzero(fold != f))
        knn = KNNRouter(k=max(wanted), search="exact").fit(rest)
        with_tasks = task_votes is not None and knn.has_task_vote
        found = knn.votes(evidence.vectors[held], wanted, tasks=with_tasks)
        for k, part in found.by_k.items():
            votes[k][held] = part
        if task_votes is not None:
            # a fold whose rest holds one task: the vote is each LLM's mean over its rest
            task_votes[held] = (
                found.tasks
                if found.tasks is not None
                else np.tile(rest.column_means().astype(np.float32), (len(held), 1))
            )
    return votes, task_votes


def fit_cross_fitted_stack(
    locus_logits: NDArray[Any],
    votes: Mapping[int, NDArray[Any]],
    truth: NDArray[Any],
    held_out: NDArray[np.bool_],
    *,
    mix_k: int,
    task_votes: NDArray[Any] | None = None,
    use_locus: bool = True,
) -> Stack:
    """The stack over every query's out-of-fold `votes` (and `task_votes`): its level read
    beside the task vote where that has the lower out-of-fold log-loss than the kNN vote at
    `mix_k` (`Stack.level`), the evidence's deviation weights fitted on all of `truth`'s
    scored cells with LOCUS left out (`fit_stack(use_locus=False)`), pulled towards the task
    vote; without task votes, the level and the pull read the kNN vote of the k in `votes`
    with the lowest out-of-fold log-loss instead, a part of its own (`_toward_best_vote`);
    then, with `use_locus`, LOCUS's share of the level and its deviation weight on the rows
    `held_out` (n_queries,) from its training, as far as they show it helps (`_locus_share`);
    last the base-rate shift over all.

    Raises:
        LocusInputError: as `fit_stack`.
    """
    y = np.asarray(truth, np.float64)
    locus = np.asarray(locus_logits, np.float64)
    level, toward = "knn", None
    ks: tuple[int, ...] = STACK_KS
    if task_votes is not None:
        # the evidence weights are pulled towards the task vote (what the per-task table
        # reads; a newcomer's few probes read it far better than their votes of 50
        # neighbours), and the level reads it where it reads the cells better
        level = choose_level(votes[mix_k], mix_k, task_votes, y)
    else:
        mix_k, ks, toward = _toward_best_vote(votes, y)
    stack = _fit_evidence(locus, votes, y, ks, mix_k, task_votes, level, toward)
    rows = np.asarray(held_out, bool)
    if use_locus and (~np.isnan(y[rows])).any():
        held_votes = {k: np.asarray(v)[rows] for k, v in votes.items()}
        held_tasks = None if task_votes is None else np.asarray(task_votes)[rows]
        stack = _locus_share(stack, locus[rows], held_votes, held_tasks, y[rows])
    both = stack.logits(locus, votes, task_votes)
    return replace(stack, shift=base_rate_shift(both, y))


def _toward_best_vote(
    votes: Mapping[int, NDArray[Any]], truth: NDArray[np.float64]
) -> tuple[int, tuple[int, ...], int]:
    """(the level's k, the parts' ks, the part the pull is towards) without tasks: the kNN
    vote that reads `truth`'s cells best, a part of its own, which the level reads too
    (the k that routes best was 5 or 10 neighbours on pools of 200 queries: noise as a
    probability; the regional vote of 500, every LLM's overall mean there)."""
    read = {k: logit_log_loss(knn_logits(vote, k), truth) for k, vote in votes.items()}
    best = min(read, key=lambda k: (read[k], k))
    ks = tuple(sorted({*STACK_KS, best}))
    return best, ks, 1 + ks.index(best)


def _fit_evidence(
    locus: NDArray[np.float64],
    votes: Mapping[int, NDArray[Any]],
    truth: NDArray[np.float64],
    ks: tuple[int, ...],
    mix_k: int,
    task_votes: NDArray[Any] | None,
    level: str,
    toward: int | None,
) -> Stack:
    """`fit_stack(use_locus=False)` over the kNN votes of `ks` (and the task vote) with its
    pull towards the part `toward` alone (None: the task vote, else the regional kNN vote)
    chosen from `PENALTIES` by cross-validation over the queries (`FOLDS` folds): the
    strongest within one standard error of the lowest held-out log-loss
    (`_one_standard_error`). The parts are near-collinear votes of the same scores, and
    the weakest pull let them offset each other on a planted pool (knn50 -1.41, the task vote
    3.31: P(correct) 0.99 for a specialist planted at 0.90)."""

    def rows_of(rows: NDArray[np.bool_]) -> tuple[dict[int, NDArray[Any]], NDArray[Any] | None]:
        tasks = None if task_votes is None else np.asarray(task_votes)[rows]
        return {k: np.asarray(v)[rows] for k, v in votes.items()}, tasks

    def fitted(rows: NDArray[np.bool_], penalty: float) -> Stack:
        chosen, tasks = rows_of(rows)
        return fit_stack(
            locus[rows], chosen, truth[rows], ks=ks, mix_k=mix_k, task_votes=tasks,
            use_locus=False, level=level, penalty=penalty, toward=toward,
        )  # fmt: skip

    if len(truth) < FOLDS:
        return fitted(np.ones(len(truth), bool), PENALTIES[0])
    fold = fold_of(len(truth))
    # each query's held-out loss under each pull
    losses = np.zeros((len(PENALTIES), len(truth)))
    for i, penalty in enumerate(PENALTIES):
        for f in range(FOLDS):
            held = fold == f
            z = fitted(~held, penalty).logits(locus[held], *rows_of(held))
            losses[i, held] = query_log_losses(z, truth[held])
    return fitted(np.ones(len(truth), bool), PENALTIES[_one_standard_error(losses)])


def _one_standard_error(losses: NDArray[np.float64]) -> int:
    """The index of the strongest pull (the last row of `losses`, (pulls, queries), in
    ascending strength) whose mean held-out loss is within one standard error of the
    lowest's, the paired difference's over the queries: the parts' weights leave the pulled
    part only as far as the queries show beyond noise (a weights' fit that amplified knn50
    against knn500 by 1.3 and 2.1 cross-validated best on 180 queries, and read the next
    40 worse than the 20-neighbour vote alone: log-loss 0.683 against 0.606)."""
    best = int(np.argmin(losses.sum(axis=1)))
    for i in range(len(losses) - 1, best, -1):
        gap = losses[i] - losses[best]
        se = float(gap.std(ddof=1) / np.sqrt(len(gap))) if len(gap) > 1 else 0.0
        if float(gap.mean()) <= se:
            return i
    return best


def _locus_share(
    stack: Stack,
    locus: NDArray[np.float64],
    votes: Mapping[int, NDArray[Any]],
    task_votes: NDArray[Any] | None,
    truth: NDArray[np.float64],
) -> Stack:
    """`stack` (the evidence alone) given LOCUS's share of the level (0, 0.1 ... 1) and
    deviation weight (`LOCUS_WEIGHTS`) with the largest lower bound on the gain in log-loss
    over the evidence alone on these held-out queries: the mean gain per query less `LOCUS_Z`
    standard errors. None above 0: the evidence alone. On a few dozen validation queries the
    lowest loss alone was often noise (a planted pool's stack took LOCUS's deviations at 0.75
    and read a 0.90 specialist at 0.99 on its task; at one standard error another took LOCUS's
    whole level, and read unseen questions worse than its own task vote)."""
    scored = ~np.isnan(truth)

    def per_query(candidate: Stack) -> NDArray[np.float64]:
        z = candidate.logits(locus, votes, task_votes)
        return query_log_losses(z, truth)[scored.any(axis=1)]

    alone = per_query(stack)
    best, bound = stack, 0.0
    for share in np.linspace(0.0, 1.0, 11):
        for weight in LOCUS_WEIGHTS:
            candidate = replace(
                stack,
                mix_weight=float(share),
                deviation_weights=(weight, *stack.deviation_weights[1:]),
            )
            gain = alone - per_query(candidate)
            spread = float(gain.std(ddof=1)) / np.sqrt(len(gain)) if len(gain) > 1 else np.inf
            if float(gain.mean()) - LOCUS_Z * spread > bound:
                best, bound = candidate, float(gain.mean()) - LOCUS_Z * spread
    return best


def cross_fitted_parts(
    locus_logits: NDArray[Any],
    scored: Evidence,
    truth: NDArray[np.float64],
    trained_on: NDArray[np.float64],
    llm_ids: Sequence[str],
    *,
    use_locus: bool,
    ann_from: int = ANN_FROM,
) -> tuple[KNNRouter, Stack, Guard | None]:
    """(the kNN router, the stack, the guard) of a `StackedRouter` chosen on the out-of-fold
    votes of every query of `scored` (training queries, then validation ones): the kNN k by
    out-of-fold routing accuracy, the router fitted on all of them; the stack by
    `fit_cross_fitted_stack` (LOCUS's share on the validation rows: those after the first
    len(`trained_on`)); the guard on the stacked out-of-fold P(correct), its default the best
    LLM on `trained_on`. `locus_logits` and `truth` (n_queries, n_llms) and the columns of
    `trained_on` are in `llm_ids`' order; the kNN router searches a graph from `ann_from`
    training queries on."""
    ids = list(llm_ids)
    candidates = sorted(set(KNNRouter().k_candidates))
    order = [list(scored.llm_ids).index(llm) for llm in ids]
    found, found_tasks = out_of_fold_votes(scored, sorted({*STACK_KS, *candidates}))
    votes = {k: vote[:, order] for k, vote in found.items()}
    task_votes = None if found_tasks is None else found_tasks[:, order]
    k = max(candidates, key=lambda k: (selection_hit(votes[k], truth), -k))
    logits = np.asarray(locus_logits, np.float64)
    held_out = np.arange(scored.n_queries) >= len(trained_on)  # the validation queries
    stack = fit_cross_fitted_stack(
        logits,
        votes,
        truth,
        held_out,
        mix_k=k,
        task_votes=task_votes,
        use_locus=use_locus,
    )
    proba = sigmoid(stack.logits(logits, votes, task_votes))
    guard = fit_default_guard(proba, trained_on, truth, ids)
    return KNNRouter(k=k, ann_from=ann_from).fit(scored), stack, guard
