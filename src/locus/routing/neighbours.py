"""The kNN router: per LLM, the mean score of the k nearest training queries it was scored on
(numpy, no training); k is chosen on `val` routing accuracy when it is given. Its cousin that
reads a query's k-means cluster instead is `locus.routing.cluster`.

    >>> import numpy as np
    >>> train = Evidence(np.eye(4, dtype=np.float32),
    ...                  np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32), ("a", "b"))
    >>> KNNRouter(k=1).fit(train).route(np.eye(4)[2:3])[0].llm_id
    'b'
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.offpolicy import selection_hit
from locus.routing.ann import ANN_FROM, SEARCH_MODES, Graph, GraphSlot
from locus.routing.baselines import (
    BaselineRouter,
    _check_vectors,
    _choose_on_validation,
)
from locus.routing.evidence import Evidence, Votes, unit_rows
from locus.routing.task_vote import TaskVote, voters
from locus.routing.vote_pass import Singles

__all__ = ["KNNRouter", "Votes"]

_BLOCK = 512  # queries per block when comparing against every training query
# LLMs each scored on a set of training queries of its own (logs that sampled each LLM's
# queries) form groups of one; from this many of them on, they share one pass over the
# candidates (`vote_pass.Singles`) instead of a search per LLM. Measured on the 80 M-score
# synthetic pool (80,000 training queries x 1,000 such LLMs, the stack's 3 ks): a warm routed
# query 96.8 -> 16.1 ms in numpy, 8.6 ms compiled; a cold route 3.9 -> 2.0 s.
_SINGLES_FROM = 16
# a group: its rows, its columns, their scores, each training row's place among the rows or -1
_Group = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32], NDArray[np.int64]]


class KNNRouter(BaselineRouter):
    """P(correct) of an LLM on a query = its mean score on the k training queries nearest to the
    query (cosine) among those it was scored on.

    Args:
        k: neighbours; None chooses it on validation routing accuracy from `k_candidates`.
        k_candidates: tried when k is None (capped at the smallest evidence of any LLM).
        search: how the nearest training queries are found: "exact" (one product with every
            training vector), "graph" (an HNSW index, `locus.routing.ann`, built by `fit` and
            saved with the router), or "auto": the graph from `ann_from` training queries on.
        ann_from: where "auto" search turns to the graph (default `ANN_FROM`, 100,000).
    """

    kind = "knn"

    def __init__(
        self,
        k: int | None = None,
        k_candidates: Sequence[int] = (5, 10, 20, 50, 100),
        search: str = "auto",
        ann_from: int = ANN_FROM,
    ):
        if search not in SEARCH_MODES:
            modes = ", ".join(SEARCH_MODES)
            raise LocusInputError(f"kNN search must be one of {modes}: {search!r}")
        if ann_from < 1:
            raise LocusInputError(f"kNN ann_from must be >= 1, found {ann_from}")
        self.k = k
        self.k_candidates = tuple(k_candidates)
        self.search = search
        self.ann_from = int(ann_from)

    def fit(self, train: Evidence, val: Evidence | None = None) -> KNNRouter:
        if train.n_queries == 0:
            raise LocusInputError("the kNN router needs at least one training query")
        self.llm_ids = list(train.llm_ids)
        self.vectors_ = unit_rows(train.vectors)
        self.scores_ = train.scores
        self.prior_ = float(np.nanmean(train.scores)) if train.observed.any() else 0.5
        self._graphs = GraphSlot()
        self._graph()  # built now, so the saved router carries it
        self.task_vote_ = None
        if train.tasks:
            asked = None if val is None or not val.tasks else (unit_rows(val.vectors), val.tasks)
            self.task_vote_ = TaskVote.fit(train.scores, train.tasks, self.vectors_, asked)
        self.validation_: dict[str, float] = {}
        if self.k is None:
            candidates = sorted(set(self.k_candidates))
            if val is None or val.n_queries == 0:
                self.k_, self.validation_ = _choose_on_validation(self, "k_", candidates, val)
            else:  # every candidate from one neighbour search
                probas, _ = self._neighbour_means(val.vectors, candidates)
                self.validation_ = {
                    str(k): selection_hit(proba, val.scores)
                    for k, proba in zip(candidates, probas, strict=True)
                }
                self.k_ = max(candidates, key=lambda k: (self.validation_[str(k)], -k))
        else:
            self.k_ = int(self.k)
        return self

    def add_llm(
        self,
        llm_id: str,
        vectors: NDArray[np.float32],
        scores: Sequence[float],
        tasks: Sequence[str | None] = (),
        *,
        replace: bool = False,
    ) -> None:
        """Onboard `llm_id` from its scores on queries of `vectors`; `tasks` (one per score,
        or none): its per-task rates in the task vote. With `replace`, an LLM the router holds
        is read again from these scores (its scores changed: more probes, production
        outcomes): the rows it was added with are kept for the queries it is scored on again
        (a search graph cannot drop rows), new queries join as new rows, and rows of queries it
        is no longer scored on stay as rows no LLM is scored on. Re-read after every batch of
        outcomes, its rows grow with its distinct queries, not with the number of re-reads.

        Raises:
            LocusInputError: an LLM already held (without `replace`) or not held (with it), or
                no score.
        """
        checked = _check_vectors(vectors, self.vectors_.shape[1], "kNN")
        # the rows of each LLM added since the fit (a loaded router has none: appended anew)
        added: dict[str, NDArray[np.int64]] = getattr(self, "_added_rows", {})
        if replace:
            self._check_fitted()
            if llm_id not in self.llm_ids:
                raise LocusInputError(f"LLM {llm_id!r} is not in the router; add it first")
            values = np.asarray(scores, dtype=np.float32).reshape(-1, 1)
            if len(values) == 0:
                raise LocusInputError(f"LLM {llm_id!r}: its evidence needs at least one score")
            new = Evidence(checked, values, (llm_id,))
            column: int | None = self.llm_ids.index(llm_id)
            kept = self.scores_.copy()  # a new array: the cached groups are rebuilt
            kept[:, column] = np.nan
        else:
            new = self._new_llm(llm_id, checked, scores)
            column = None
            kept = np.hstack([self.scores_, np.full((len(self.scores_), 1), np.nan, np.float32)])
        if self.task_vote_ is not None:
            self.task_vote_ = self.task_vote_.with_llm(
                new.scores[:, 0], new.n_queries, tasks, column=column
            )
        units = unit_rows(new.vectors)
        where = -1 if column is None else column
        # the rows this LLM was added with, by their vector: reused where it is scored again
        free: dict[bytes, list[int]] = {}
        for row in added.get(llm_id, np.zeros(0, np.int64)).tolist():
            free.setdefault(self.vectors_[row].tobytes(), []).append(row)
        places = np.full(len(units), -1, dtype=np.int64)
        for i, unit in enumerate(units):
            spare = free.get(unit.tobytes())
            if spare:
                places[i] = spare.pop(0)
        again, fresh = np.flatnonzero(places >= 0), np.flatnonzero(places < 0)
        kept[places[again], where] = new.scores[again, 0]
        # the LLM's other evidence joins as rows of its own: the other LLMs have no score there
        rows = np.full((len(fresh), kept.shape[1]), np.nan, dtype=np.float32)
        rows[:, where] = new.scores[fresh, 0]
        start = len(self.vectors_)
        if len(fresh):
            self._graphs.add(units[fresh])
            self.vectors_ = np.vstack([self.vectors_, units[fresh]])
        self.scores_ = np.vstack([kept, rows])
        added[llm_id] = np.concatenate(
            [places[again], np.arange(start, start + len(fresh), dtype=np.int64)]
        )
        self._added_rows = added
        if column is None:
            self.llm_ids.append(llm_id)

    def add_outcomes(
        self,
        llm_id: str,
        vectors: NDArray[np.float32],
        scores: Sequence[float],
        tasks: Sequence[str | None] = (),
        *,
        forget_fit: bool = False,
        keep_earlier: int | None = None,
    ) -> int:
        """Scores of an LLM of the fit on more queries (production outcomes), each one more
        scored query of that LLM: a row of its own (the other LLMs unscored there), or, for a
        query it has an outcome row for already (the same vector), that row's score replaced.
        Its neighbours' votes read them as any of its scores, and its task vote's rates are
        read again from all its scores, an outcome counting as one score of its task: the one
        `tasks` names (one per score, None where not known), else the most common among the
        query's `TASK_K` nearest training queries. With `forget_fit` (its endpoint changed:
        `locus.routing.drift`), its scores of the fit are dropped: its votes read its outcomes
        alone. With `keep_earlier`, of its earlier outcomes (on other queries than these) only
        the newest `keep_earlier` are kept (those since the change began; 0: these outcomes
        alone, as when older ones aged out, and then `scores` may be empty). Returns the rows
        added.

        Raises:
            LocusInputError: an LLM not of the fit (one joined since reads its outcomes with
                its other scores: `add_llm(replace=True)`), or no score.
        """
        self._check_fitted()
        added: dict[str, NDArray[np.int64]] = getattr(self, "_added_rows", {})
        if llm_id not in self.llm_ids or llm_id in added:
            raise LocusInputError(
                f"LLM {llm_id!r} is not an LLM of the fit; an LLM joined since reads its "
                "outcomes with its other scores (add_llm with replace)"
            )
        units = unit_rows(_check_vectors(vectors, self.vectors_.shape[1], "kNN"))
        values = np.asarray(scores, dtype=np.float32).reshape(-1)
        if len(values) != len(units) or (len(values) == 0 and keep_earlier is None):
            raise LocusInputError(
                f"outcomes of {llm_id!r}: one score per query vector, at least one; found "
                f"{len(values)} scores for {len(units)} vectors"
            )
        column = self.llm_ids.index(llm_id)
        # per LLM of the fit: its outcome rows by vector, and each row's task
        mine: dict[str, dict[bytes, int]] = getattr(self, "_outcome_rows", {})
        topics: dict[str, dict[int, str | None]] = getattr(self, "_outcome_tasks", {})
        rows_of, task_of = mine.setdefault(llm_id, {}), topics.setdefault(llm_id, {})
        named: list[str | None] = list(tasks) if len(tasks) == len(values) else [None] * len(values)
        vote = self.task_vote_ if self.has_task_vote else None
        if vote is not None and any(t is None for t in named):
            shares = self.task_shares(units)[:, : len(vote.names)]
            read = [vote.names[int(i)] for i in shares.argmax(axis=1)]
            named = [t if t is not None else r for t, r in zip(named, read, strict=True)]
        kept = self.scores_.copy()  # a new array: the cached groups are rebuilt
        fresh: list[int] = []
        touched: set[int] = set()  # its outcome rows these scores replace
        pending: dict[bytes, int] = {}  # a new row's place in `fresh`, by its vector
        for i, unit in enumerate(units):
            key = unit.tobytes()
            row = rows_of.get(key)
            if row is None and key in pending:  # the same query twice: the later score wins
                fresh[pending[key]] = i
            elif row is None:
                pending[key] = len(fresh)
                fresh.append(i)
            else:
                kept[row, column] = values[i]
                task_of[row] = named[i]
                touched.add(row)
        start = len(self.vectors_)
        new_rows = np.full((len(fresh), kept.shape[1]), np.nan, dtype=np.float32)
        new_rows[:, column] = values[fresh]
        for offset, i in enumerate(fresh):
            rows_of[units[i].tobytes()] = start + offset
            task_of[start + offset] = named[i]
        if fresh:
            self._graphs.add(units[fresh])
            self.vectors_ = np.vstack([self.vectors_, units[fresh]])
        earlier = sorted(r for r in rows_of.values() if r < len(kept) and r not in touched)
        if keep_earlier is not None:  # outcomes from before the change, or too old, go
            gone = earlier[: max(len(earlier) - keep_earlier, 0)]
            kept[gone, column] = np.nan
            earlier = earlier[len(gone) :]
        if forget_fit:
            outcome_rows = np.zeros(len(kept), bool)
            outcome_rows[[*earlier, *touched]] = True
            kept[~outcome_rows, column] = np.nan
        self.scores_ = np.vstack([kept, new_rows])
        self._outcome_rows, self._outcome_tasks = mine, topics
        if vote is not None:
            evidence = self.scores_[:, column]
            scored = np.flatnonzero(~np.isnan(evidence))
            none = len(vote.names)
            tasks_of = [
                task_of[int(r)]
                if int(r) in task_of
                else (vote.names[vote.codes[r]] if vote.codes[r] < none else None)
                for r in scored
            ]
            # the new rows vote no task (`TaskVote.with_llm`): only the fit's rows do
            self.task_vote_ = vote.with_llm(evidence[scored], len(fresh), tasks_of, column=column)
        return len(fresh)

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        self._check_fitted()
        return self._neighbour_means(query_vectors, [self.k_])[0][0]

    @property
    def has_task_vote(self) -> bool:
        """Whether the training queries carried tasks (two or more): `votes` can
        add the task vote (`locus.routing.task_vote`)."""
        return getattr(self, "task_vote_", None) is not None

    def votes(
        self,
        query_vectors: NDArray[np.float32],
        ks: Sequence[int],
        *,
        tasks: bool = False,
        given_tasks: Sequence[str | None] | None = None,
    ) -> Votes:
        """The votes at each k of `ks` (the fitted k aside), from one neighbour search: what
        `locus.routing.stack.Stack` reads; with `tasks`, the task vote too: the tasks of the
        query's nearest training queries, or, for a query whose task `given_tasks` names (one
        per query, None where not known), that task's rates (`TaskVote.given`).

        Raises:
            LocusInputError: `tasks` asked of a router fitted without tasks.
        """
        self._check_fitted()
        if tasks and not self.has_task_vote:
            raise LocusInputError("this kNN router was fitted on queries without tasks")
        wanted = [int(k) for k in ks]
        found, voted = self._neighbour_means(query_vectors, wanted, tasks=tasks)
        vote = self.task_vote_ if tasks else None
        if vote is not None and voted is not None and given_tasks is not None:
            voted = vote.given(given_tasks, voted)
        return Votes(dict(zip(wanted, found, strict=True)), voted)

    def task_shares(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float64]:
        """(n_queries, n_tasks + 1) the share of each task among each query's `TASK_K` nearest
        training queries that vote (exact search: what the fit reads, `locus.routing.thin`).

        Raises:
            LocusInputError: a router fitted without tasks.
        """
        self._check_fitted()
        vote = self.task_vote_ if self.has_task_vote else None
        if vote is None:
            raise LocusInputError("this kNN router was fitted on queries without tasks")
        queries = unit_rows(_check_vectors(query_vectors, self.vectors_.shape[1], "kNN router"))
        return vote.nearest_shares(queries, self.vectors_, _BLOCK)

    def _neighbour_means(
        self, query_vectors: NDArray[np.float32], ks: Sequence[int], *, tasks: bool = False
    ) -> tuple[list[NDArray[np.float32]], NDArray[np.float32] | None]:
        """P(correct) for each k of `ks` (n_queries, n_llms), from one neighbour search: the
        2 max(ks) nearest training queries of all, then per group of LLMs the k nearest it was
        scored on as a set for each k, largest first, each set partitioned out of the one
        before (no sort). A group scored on at least k of those candidates has its k nearest
        among them; a group scored on fewer is searched over all its rows. With `tasks`, the
        task vote of the `TASK_K` nearest candidates beside them (else None)."""
        queries = unit_rows(_check_vectors(query_vectors, self.vectors_.shape[1], "kNN router"))
        outs = [
            np.full((len(queries), len(self.llm_ids)), self.prior_, dtype=np.float32) for _ in ks
        ]
        task_vote = self.task_vote_ if tasks else None
        shape = (len(queries), len(self.llm_ids)) if task_vote is not None else (0, 0)
        voted = np.empty(shape, dtype=np.float32)  # the task votes
        ordered = sorted(set(ks), reverse=True)
        n_train = len(self.vectors_)
        depth = min(2 * ordered[0], n_train)
        singles = self._singles()
        graph = self._graph() if depth < n_train else None
        for start in range(0, len(queries), _BLOCK):
            block = slice(start, start + _BLOCK)
            found = graph.search(queries[block], depth) if graph is not None else None
            similarity: NDArray[np.float32] | None = None
            if found is not None:  # the graph's candidates
                candidates, candidate_similarity = found
            else:
                similarity = queries[block] @ self.vectors_.T  # (b, n_train)
                if depth < n_train:
                    candidates = np.argpartition(-similarity, depth - 1, axis=1)[:, :depth]
                else:
                    candidates = np.broadcast_to(np.arange(n_train), similarity.shape)
                candidate_similarity = np.take_along_axis(similarity, candidates, axis=1)
            if task_vote is not None:
                voting = task_vote.voting(candidates, candidate_similarity)
                voted[block] = task_vote.proba(voters(candidates, voting), queries[block])
            searched: set[int] = set()
            if singles is not None:
                short = singles.means(candidates, candidate_similarity, ordered, ks, outs, block)
                searched = set(singles.columns.tolist()) - short
            for rows, columns, values, position in self._groups(searched):
                top = min(ordered[0], len(rows))
                place = position[candidates]  # (b, T): the candidate's row in the group, or -1
                if ((place >= 0).sum(axis=1) >= top).all():
                    near_similarity = np.where(place >= 0, candidate_similarity, -np.inf)
                    near = place
                else:
                    if similarity is None:  # the graph's candidates are short: every row then
                        similarity = queries[block] @ self.vectors_.T
                    near_similarity = similarity[:, rows]  # (b, n_rows)
                    near = np.broadcast_to(np.arange(len(rows)), near_similarity.shape)
                for k in ordered:
                    count = min(k, len(rows))
                    if count < near.shape[1]:
                        nearest = np.argpartition(-near_similarity, count - 1, axis=1)[:, :count]
                        near = np.take_along_axis(near, nearest, axis=1)  # (b, count)
                        near_similarity = np.take_along_axis(near_similarity, nearest, axis=1)
                    means = values[near].mean(axis=1, dtype=np.float64)  # (b, n_cols)
                    for out, wanted in zip(outs, ks, strict=True):
                        if wanted == k:
                            out[block, columns] = means
        return outs, (None if task_vote is None else voted)

    def _graph(self) -> Graph | None:
        """The HNSW graph over the training vectors where `search` asks for one (built the
        first time, or read from the saved bytes); None for exact search."""
        wanted = self.search == "graph" or (
            self.search == "auto" and len(self.vectors_) >= self.ann_from
        )
        return self._graphs.get(self.vectors_, wanted)

    def _patterns(self) -> list[list[int]]:
        """The LLMs' columns grouped by the set of training queries they were scored on (LLMs
        without a training score left out). Kept until the scores change (fit, add_llm,
        load)."""
        cached = getattr(self, "_by_pattern", None)
        if cached is not None and cached[0] is self.scores_:
            return cached[1]
        observed = ~np.isnan(self.scores_)
        scored = observed.any(axis=0)
        # one bit string per LLM, packed in one pass (packing each strided column took 0.5 s
        # at 80,000 x 1,000)
        packed = np.packbits(np.ascontiguousarray(observed.T), axis=1)  # (n_llms, bytes)
        by_pattern: dict[bytes, list[int]] = {}
        for column in np.flatnonzero(scored).tolist():
            by_pattern.setdefault(packed[column].tobytes(), []).append(column)
        patterns = list(by_pattern.values())
        self._by_pattern = (self.scores_, patterns)
        return patterns

    def _singles(self) -> Singles | None:
        """The LLMs alone in their group, for the vectorised pass, where there are at least
        `_SINGLES_FROM` of them."""
        cached = getattr(self, "_singled", None)
        if cached is not None and cached[0] is self.scores_:
            return cached[1]
        alone = [columns[0] for columns in self._patterns() if len(columns) == 1]
        singles = None
        if len(alone) >= _SINGLES_FROM:
            singles = Singles(self.scores_, np.asarray(sorted(alone), dtype=np.int64))
        self._singled = (self.scores_, singles)
        return singles

    def _groups(self, skip: Collection[int] = ()) -> list[_Group]:
        """(rows, columns, scores of those rows and columns, each training row's place among
        `rows` or -1) per set of LLMs scored on the same training queries: they share one
        neighbour search. Groups of one column in `skip` (done by the vectorised pass) are
        left out. Kept until the scores change, so routing one query costs one product with
        the training vectors; a group is built the first time it is needed."""
        cached: tuple[NDArray[np.float32], dict[int, _Group]] | None
        cached = getattr(self, "_grouped", None)
        if cached is None or cached[0] is not self.scores_:
            cached = (self.scores_, {})
            self._grouped = cached
        built = cached[1]
        groups = []
        for columns in self._patterns():
            if len(columns) == 1 and columns[0] in skip:
                continue
            key = columns[0]
            if key not in built:
                rows = np.flatnonzero(~np.isnan(self.scores_[:, key]))
                picked = np.asarray(columns, dtype=np.int64)
                position = np.full(len(self.scores_), -1, dtype=np.int64)
                position[rows] = np.arange(len(rows))
                built[key] = (rows, picked, self.scores_[np.ix_(rows, picked)], position)
            groups.append(built[key])
        return groups

    def _settings(self) -> dict[str, Any]:
        return {
            "k": self.k_,
            "k_candidates": list(self.k_candidates),
            "prior": self.prior_,
            "validation": self.validation_,
            "search": self.search,
            "ann_from": self.ann_from,
            "task_names": None if self.task_vote_ is None else list(self.task_vote_.names),
        }

    def _arrays(self) -> dict[str, NDArray[Any]]:
        arrays: dict[str, NDArray[Any]] = {"vectors": self.vectors_, "scores": self.scores_}
        saved = self._graphs.saved()
        if saved is not None:
            arrays["graph"] = saved
        if self.task_vote_ is not None:
            arrays.update(self.task_vote_.arrays())
        return arrays

    def _restore(self, settings: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> None:
        self.k = self.k_ = int(settings["k"])
        self.k_candidates = tuple(settings["k_candidates"])
        self.prior_ = float(settings["prior"])
        self.validation_ = dict(settings["validation"])
        # older router folders' missing fields: `locus.artifact.formats.upgrade_router_folder`
        self.search, self.ann_from = str(settings["search"]), int(settings["ann_from"])
        self.vectors_, self.scores_ = arrays["vectors"], arrays["scores"]
        self._graphs = GraphSlot(arrays.get("graph"))  # read when first searched; None: none
        names = settings["task_names"]
        self.task_vote_ = None if not names else TaskVote.from_arrays(names, arrays)
