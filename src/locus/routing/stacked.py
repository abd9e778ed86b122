"""`StackedRouter`: the router `locus fit` produces, and the one every caller routes with.

LOCUS's calibrated P(correct) stacked with a kNN router's votes (`locus.routing.stack.Stack`),
and the guard that keeps a query on the best single LLM unless another clears a margin
(`locus.routing.guard`). One recipe, written once (`locus.routing.stacked_fit`): `locus fit`,
the benchmark suites, the workspace router and the server all build it through this class.

An artifact folder holds the LOCUS networks (`locus.artifact`) and, beside them, this router's
own files: `stacked.json` (the stack and the guard) and `knn/` (the kNN router), written and
read by the router artifact (`locus.routing.router_artifact.save` and `load`: every file, any
version).

    >>> router = StackedRouter.fit(LocusRouter(model), train, val)  # doctest: +SKIP
    >>> router_artifact.save("artifacts/default", router)  # doctest: +SKIP
    >>> loaded = router_artifact.load("artifacts/default").router  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.artifact.layout import KNN_FOLDER, STACKED_FILE
from locus.calibration import sigmoid
from locus.errors import LocusInputError
from locus.routing.ann import ANN_FROM
from locus.routing.cross_fit import CROSS_FIT_CELLS
from locus.routing.evidence import Evidence
from locus.routing.factors import Factors
from locus.routing.guard import Guard, rechosen_default
from locus.routing.level import FitRows, reference_level
from locus.routing.locus_router import LogitRouter
from locus.routing.neighbours import KNNRouter
from locus.routing.posterior import posterior_votes
from locus.routing.stack import Stack
from locus.routing.stacked_fit import (
    LEARN_MIN_PER_LLM,
    STACK_MAX_CELLS,
    STACK_MIN_ROWS,
    fit_stacked,
    fit_thin_reading,
    learns_from,
)
from locus.routing.thin import ThinEvidence, ThinLogits, bounded_level, level_shift

__all__ = [
    "KNN_FOLDER",
    "LEARN_MIN_PER_LLM",
    "PRIOR_STRENGTH",
    "STACKED_FILE",
    "StackedRouter",
    "learns_from",
]

# how many scores LOCUS's P(correct) counts as beside an onboarded LLM's own votes (`join`)
PRIOR_STRENGTH = 32.0


class StackedRouter(LogitRouter):
    """LOCUS stacked with a kNN router, and a guard: the fitted router of a workspace.

    Args:
        locus: LOCUS over the pool (`LocusRouter` with torch, `NumpyLocusRouter` without).
        knn: the kNN router the stack reads; None with `stack` None: LOCUS alone.
        stack: how LOCUS's logits and the kNN votes combine.
        guard: applied by `route` to accuracy routing unless the request says `guarded=False`.
        prior_strength: the scores LOCUS's P(correct) counts as beside a joined LLM's votes.
        thin: how a joined LLM with few scores is read beside the fitted LLMs (None: by the
            stack, as a fitted LLM).
        factors: the models of a joined LLM's factor readings (`thin`; None: read as 0).

    An LLM onboarded since the fit joins the votes from its own scores (`join`: its votes are
    posteriors, LOCUS's P(correct) counted as `prior_strength` scores); with up to 128 scores
    (fading out by 512) it is read beside the fitted LLMs instead (`thin`, fitted by `fit`
    where the stack has its own validation split: `locus.routing.thin`). LLMs of `locus` that
    have not joined get LOCUS's P(correct) alone.

    Raises:
        LocusInputError: a stack without a kNN router or the other way round.
    """

    def __init__(
        self,
        locus: LogitRouter,
        knn: KNNRouter | None = None,
        stack: Stack | None = None,
        guard: Guard | None = None,
        *,
        prior_strength: float | None = None,
        thin: ThinEvidence | None = None,
        factors: Factors | None = None,
    ) -> None:
        if (knn is None) != (stack is None):
            raise LocusInputError(
                "a stacked router needs both a kNN router and a stack, or neither"
            )
        self.locus, self.knn, self.stack, self.guard = locus, knn, stack, guard
        self.thin = thin if stack is not None else None
        self.factors = factors if self.thin is not None else None
        self._levels: dict[str, float] = {}  # a joined LLM's level shift (`ThinEvidence`)
        self._factor_rows: dict[str, dict[str, NDArray[Any]]] = {}  # its vectors in `factors`
        self.prior_strength = PRIOR_STRENGTH if prior_strength is None else float(prior_strength)
        if not self.prior_strength >= 0:
            raise LocusInputError(f"prior_strength must be >= 0, found {self.prior_strength}")
        self._knn_column = {} if knn is None else {llm: i for i, llm in enumerate(knn.llm_ids)}
        self.joined: dict[str, int] = {}  # LLM -> its scores, for those joined since the fit
        self.changed: set[str] = set()  # LLMs of the fit read from their outcomes alone
        self._fit_rows = 0 if knn is None else len(knn.vectors_)  # before any LLM joins
        self._scored_counts: tuple[NDArray[Any], NDArray[np.int64]] | None = None
        self._fit_index: FitRows | None = None  # the fit's rows by their vectors (`_level_of`)

    @property
    def llm_ids(self) -> Sequence[str]:  # type: ignore[override]
        return self.locus.llm_ids

    # -- prediction ------------------------------------------------------------------------

    def _stacked(
        self,
        vectors: NDArray[np.float32],
        locus_logits: NDArray[Any],
        tasks: Sequence[str | None] | None = None,
        *,
        thin: float | None = None,
    ) -> tuple[list[int], NDArray[np.float64]] | None:
        """(the pool columns the kNN router knows, their stacked logits), None for none;
        `tasks`: each query's task where the request knows it (the task vote then reads it).
        A joined LLM's logits: its `ThinEvidence` reading for its share by its scores
        (`ThinEvidence.share`; `thin`: that share instead), the rest the stack's."""
        found = self._stack_and_readings(vectors, locus_logits, tasks)
        if found is None:
            return None
        mine, out, readings = found
        for c, (llm, reading) in readings.items():
            assert self.thin is not None  # readings are read only where there is one
            weight = self.thin.share(self.joined[llm]) if thin is None else thin
            if weight > 0:
                level = reading + self._levels.get(llm, 0.0)
                out[:, c] = weight * level + (1.0 - weight) * out[:, c]
        return mine, out

    def _stack_and_readings(
        self,
        vectors: NDArray[np.float32],
        locus_logits: NDArray[Any],
        tasks: Sequence[str | None] | None = None,
    ) -> tuple[list[int], NDArray[np.float64], dict[int, tuple[str, NDArray[Any]]]] | None:
        """(the pool columns the kNN router knows, the stack's logits for them, and for each
        joined LLM's place among them (LLM, its `ThinEvidence` reading before its level
        shift) where the fit kept one), from one neighbour search; None without a kNN part."""
        if self.stack is None or self.knn is None:
            return None
        pairs = [
            (j, self._knn_column[llm])
            for j, llm in enumerate(self.locus.llm_ids)
            if llm in self._knn_column
        ]
        if not pairs:
            return None
        mine, theirs = (list(side) for side in zip(*pairs, strict=True))
        found = self.knn.votes(
            vectors, self.stack.needed_ks, tasks=self.stack.tasks, given_tasks=tasks
        ).columns(theirs)
        votes: dict[int, NDArray[Any]] = dict(found.by_k)
        task_votes: NDArray[Any] | None = found.tasks
        reference = None
        if self.joined:
            prior = sigmoid(np.asarray(locus_logits[:, mine], np.float64))
            counts = np.array([self.joined.get(self.locus.llm_ids[j], -1) for j in mine])
            # the vote at k stands for the query's k nearest training queries, of which a
            # joined LLM's n scores hold k n / N in expectation (N the fit's training rows):
            # the rest is LOCUS's; its task vote is its own per-task rates, smoothed towards
            # its mean (`TaskVote.with_llm`)
            share = counts / max(self._fit_rows, 1)
            votes = {
                k: posterior_votes(
                    v,
                    prior,
                    np.where(counts >= 0, np.minimum(counts, k * share), -1.0),
                    self.prior_strength,
                )
                for k, v in votes.items()
            }
            reference = counts < 0  # the fitted LLMs: a joined one moves none of theirs
        read = locus_logits[:, mine]
        if self.changed:
            # an LLM whose endpoint changed is read from its outcomes alone: its fall moves
            # no other LLM's level or deviations, and LOCUS's reading of it (an embedding of
            # the old endpoint's scores) is the pool's mean until it is fitted again
            steady = np.array([self.locus.llm_ids[j] not in self.changed for j in mine])
            reference = steady if reference is None else reference & steady
            if steady.any():
                read = np.array(read, np.float64)
                read[:, ~steady] = read[:, steady].mean(axis=1, keepdims=True)
        out = self.stack.logits(read, votes, task_votes, reference)
        readings: dict[int, tuple[str, NDArray[Any]]] = {}
        if self.thin is not None and reference is not None and reference.any():
            pool, ks = out[:, reference], self.stack.ks
            factor = {} if self.factors is None else self.factors.by_llm(vectors, self._factor_rows)
            for c in np.flatnonzero(~reference):
                llm = self.locus.llm_ids[mine[c]]
                if llm not in self.joined:
                    continue  # an LLM of the fit whose endpoint changed: the stack reads it
                task = None if task_votes is None else task_votes[:, c]
                near = None if not ks else (votes[min(ks)][:, c], votes[max(ks)][:, c])
                own = np.asarray(locus_logits[:, mine[c]], np.float64)
                n = float(self.joined[llm])
                reading = self.thin.logits(own, task, near, pool, n, factor.get(llm))
                readings[int(c)] = (llm, reading)
        return mine, out, readings

    def join(
        self,
        llm_id: str,
        vectors: NDArray[np.float32],
        scores: NDArray[np.floating[Any]],
        tasks: Sequence[str | None] = (),
        *,
        default_scores: NDArray[np.floating[Any]] | None = None,
    ) -> None:
        """Give `llm_id`, an LLM of LOCUS's pool onboarded since the fit, its own votes: its
        `scores` (n,) on queries of `vectors` (n, dq) (with their `tasks`, or none) join the
        kNN router and the task vote as any pool LLM's (`KNNRouter.add_llm`), weighed against
        LOCUS by their number (`prior_strength`). `default_scores`: the guard's default LLM's
        scores on the same queries (NaN: not scored); where the newcomer beats it on them
        beyond noise, it becomes the default (`rechosen_default`). Joined again (its scores
        changed: more probes, production outcomes), its votes are read from the new scores
        (`KNNRouter.add_llm(replace=True)`). A router without a kNN part, or an LLM of the
        fit, is left as it is.

        Raises:
            LocusInputError: an LLM not in LOCUS's pool, or no score.
        """
        if llm_id not in self.locus.llm_ids:
            raise LocusInputError(f"{llm_id!r} is not in LOCUS's pool: embed it first")
        values = np.asarray(scores, np.float32).reshape(-1)
        kept = ~np.isnan(values)
        if not kept.any():
            raise LocusInputError(f"{llm_id!r}: joining the votes needs at least one score")
        if self.knn is None or (llm_id in self._knn_column and llm_id not in self.joined):
            return  # an LLM of the fit keeps the votes it was fitted with
        rows = [int(i) for i in np.flatnonzero(kept)]
        task_list = [tasks[i] for i in rows] if len(tasks) == len(values) else []
        evidence = (np.asarray(vectors, np.float32)[kept], values[kept].tolist(), task_list)
        if llm_id in self.joined:  # its scores changed: read again
            self.knn.add_llm(llm_id, *evidence, replace=True)
        else:
            self.knn.add_llm(llm_id, *evidence)
            self._knn_column[llm_id] = len(self.knn.llm_ids) - 1
        self.joined[llm_id] = int(kept.sum())
        self._factor_rows.pop(llm_id, None)
        if self.factors is not None and self.thin is not None and self.thin.share(kept.sum()) > 0:
            self._factor_rows[llm_id] = dict(self.factors.onboarded(evidence[0], values[kept]))
        if self.thin is not None:
            self._levels[llm_id] = self._level_of(llm_id, evidence[0], values[kept], task_list)
        if self.guard is not None and default_scores is not None:
            self.guard = rechosen_default(self.guard, llm_id, values, default_scores)

    def add_outcomes(
        self,
        llm_id: str,
        vectors: NDArray[np.float32],
        scores: NDArray[np.floating[Any]],
        tasks: Sequence[str | None] = (),
        *,
        forget_fit: bool = False,
        keep_earlier: int | None = None,
    ) -> int:
        """Production outcomes of `llm_id`, an LLM of the fit: its `scores` (n,) on queries of
        `vectors` (n, dq), each one more scored query of it in its neighbour votes and task
        vote (`KNNRouter.add_outcomes`), which the stack reads at once. An LLM joined since
        the fit reads its outcomes with its other scores (`join`); a router without a kNN
        part, or an LLM it does not hold, is left as it is. `forget_fit`: its scores of the
        fit dropped (its endpoint changed); `keep_earlier`: its earlier outcomes but the newest
        `keep_earlier` dropped (`KNNRouter.add_outcomes`). Returns the rows added.
        """
        if self.knn is None or llm_id not in self._knn_column or llm_id in self.joined:
            return 0
        values = np.asarray(scores, np.float32).reshape(-1)
        kept = ~np.isnan(values)
        if not kept.any() and keep_earlier is None:
            return 0
        given = [tasks[int(i)] for i in np.flatnonzero(kept)] if len(tasks) == len(values) else []
        if forget_fit:
            self.changed.add(llm_id)
            self._stand_down_for(llm_id)
        return self.knn.add_outcomes(
            llm_id, np.asarray(vectors, np.float32)[kept], values[kept].tolist(), given,
            forget_fit=forget_fit, keep_earlier=keep_earlier,
        )  # fmt: skip

    def _stand_down_for(self, llm_id: str) -> None:
        """A guard whose default is `llm_id`, whose endpoint changed, stands down (margin 0:
        every query to the best utility): the evidence that made it the default is void, and
        a guard held on it would keep every query on the changed endpoint."""
        guard = self.guard
        if guard is None or guard.default != llm_id or guard.margin == 0:
            return
        validation = {**guard.validation, "stood_down": f"{llm_id}'s endpoint changed"}
        self.guard = Guard(default=guard.default, margin=0.0, validation=validation)

    def _level_of(
        self, llm_id: str, vectors: NDArray[Any], scores: NDArray[Any], tasks: list[str | None]
    ) -> float:
        """A joined LLM's level shift: its `ThinEvidence` reading's mean P(correct) over the
        fit's queries of its scored queries' tasks put at what its scores say there, read against
        how easy the fitted LLMs found them (`level.reference_level`), bounded (`bounded_level`)."""
        if self.thin is None or self.knn is None or self.thin.share(self.joined[llm_id]) == 0:
            return 0.0  # read by the stack alone: no level of its own to keep
        if self._fit_index is None:
            self._fit_index = FitRows(self.knn.vectors_[: self._fit_rows])
        fitted = [self._knn_column[llm] for llm in self.knn.llm_ids if llm not in self.joined]
        target, rows = reference_level(self.knn, fitted, self._fit_index, vectors, scores, tasks)
        logits = np.array(self.locus.predict_logits(rows), dtype=np.float64)
        stacked = self._stack_and_readings(rows, logits)
        if stacked is None:
            return 0.0
        mine, _, readings = stacked
        reading = readings[mine.index(list(self.locus.llm_ids).index(llm_id))][1]
        return level_shift(reading, bounded_level(target, self.joined[llm_id]))

    def predict_logits(
        self, query_vectors: NDArray[np.float32], tasks: Sequence[str | None] | None = None
    ) -> NDArray[np.float64]:
        vectors = np.asarray(query_vectors, dtype=np.float32)
        logits = np.array(self.locus.predict_logits(vectors), dtype=np.float64)
        stacked = self._stacked(vectors, logits, tasks)
        if stacked is not None:
            logits[:, stacked[0]] = stacked[1]
        return logits

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        return self.predict_proba_given_tasks(query_vectors, None)

    def predict_proba_given_tasks(
        self, query_vectors: NDArray[np.float32], tasks: Sequence[str | None] | None
    ) -> NDArray[np.float32]:
        """P(correct) (n_queries, n_llms); a query whose task `tasks` names (one per query,
        None where not known) has the per-task rates of that task as its task vote instead of
        the tasks of its nearest training queries (a task the fit never saw: read from the
        neighbours, as without one)."""
        vectors = np.asarray(query_vectors, dtype=np.float32)
        logits = self.locus.predict_logits(vectors)
        proba = sigmoid(logits).astype(np.float32)
        stacked = self._stacked(vectors, logits, tasks)
        if stacked is not None:
            proba[:, stacked[0]] = sigmoid(stacked[1])
        return proba

    def evidence_counts(self) -> NDArray[np.float64]:  # (n_llms,), never None here
        """(n_llms,) how many scores each LLM's P(correct) rests on, in `llm_ids`' order: an
        LLM of the fit the scores its kNN votes read (at most the largest k of the stack), one
        joined since its scores plus LOCUS's `prior_strength`, one with LOCUS alone
        `prior_strength`. The `uncertainty` of a prediction p is sqrt(p (1 - p) / (n + 1)),
        the standard deviation of a Beta posterior of n scores: it shrinks as evidence grows."""
        out = np.full(len(self.llm_ids), self.prior_strength)
        if self.knn is None or self.stack is None:
            return out
        # counted once per score matrix (it is replaced, never changed in place, when an LLM
        # joins): at 80,000 x 1,000 cells the count alone would cost a routed query ~50 ms
        cached = self._scored_counts
        if cached is None or cached[0] is not self.knn.scores_:
            cached = (self.knn.scores_, (~np.isnan(self.knn.scores_)).sum(axis=0))
            self._scored_counts = cached
        scored = cached[1]
        largest = max(self.stack.needed_ks)
        for j, llm in enumerate(self.llm_ids):
            column = self._knn_column.get(llm)
            if column is None:
                continue
            n = float(scored[column])
            out[j] = n + self.prior_strength if llm in self.joined else min(n, largest)
        return out

    # -- fitting ---------------------------------------------------------------------------

    @classmethod
    def fit(
        cls,
        locus: LogitRouter,
        train: Evidence,
        val: Evidence,
        *,
        knn: KNNRouter | None = None,
        stacked: bool = True,
        use_locus: bool | None = None,
        cross_fit_below: int = CROSS_FIT_CELLS,
        max_cells: int = STACK_MAX_CELLS,
        min_rows: int = STACK_MIN_ROWS,
        ann_from: int = ANN_FROM,
        factors: Factors | bool = True,
    ) -> StackedRouter:
        """Stack a fitted LOCUS with a kNN router and choose the guard, on `train` and `val`
        (the recipe and what each argument does: `locus.routing.stacked_fit.fit_stacked`),
        then, where the stack had a validation split of its own, how an LLM joined since is
        read (`fit_thin`). `factors`: the factor models a newcomer's "factor" and "ability"
        readings onboard it in: fitted here on `train` and `val` (True), these (a `Factors`
        of the same pool, fitted on the same split), or none (False).

        Raises:
            LocusInputError: evidence over other LLMs than LOCUS's pool.
        """
        parts = fit_stacked(
            locus, train, val, knn=knn, stacked=stacked, use_locus=use_locus,
            cross_fit_below=cross_fit_below, max_cells=max_cells, min_rows=min_rows,
            ann_from=ann_from,
        )  # fmt: skip
        router = cls(locus, parts.knn, parts.stack, parts.guard)
        if parts.thin_val is not None:
            router.thin, router.factors = fit_thin_reading(
                router, train, parts.thin_val, factors=factors
            )
        return router

    def save(self, path: str | Path) -> Path:
        """Refused: a stacked router is saved with LOCUS's networks, as an artifact.

        Raises:
            LocusInputError: always, naming `locus.routing.router_artifact.save`.
        """
        raise LocusInputError(
            f"a stacked router is saved as an artifact, beside LOCUS's networks: "
            f"locus.routing.router_artifact.save({str(path)!r}, router)"
        )

    def fit_thin(
        self,
        train: Evidence,
        val: Evidence,
        thin_logits: ThinLogits | None = None,
        *,
        factors: Factors | bool | None = None,
    ) -> None:
        """Fit how an LLM joined since the fit is read beside the fitted LLMs (`fit` calls it;
        `locus.routing.stacked_fit.fit_thin_reading`): `thin_logits` embeds them (default: the
        torch LOCUS's), `factors` as `fit`'s (None: the router's own, if any)."""
        chosen = (self.factors or False) if factors is None else factors
        self.thin, self.factors = fit_thin_reading(self, train, val, thin_logits, factors=chosen)
