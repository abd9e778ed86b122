"""`WorkspaceRouter`: a long-lived router over a workspace: query vectors + the fitted router +
costs, each loaded once.

- vectors: `locus.text.query_vectors.QueryVectors` (the store's cache, memory, the encoder);
- the router: the artifact's `StackedRouter` (`locus.routing.stacked`) over LOCUS in numpy
  (`NumpyLocusRouter`: routing never imports torch) and the workspace's live pool;
- costs: each LLM's expected USD on each query, from the artifact's per-query cost model
  (`locus.routing.costs`), else its mean observed cost, else the catalog's cost_per_query,
  else the catalog's per-token prices (price_in_per_mtok, price_out_per_mtok, `locus import
  llms`) on the query's estimated tokens (`TokenPrices`); a budget is tuned on the fit's
  validation queries.

`locus route`, `locus evaluate`, the atlas and the HTTP service all route through it.

    >>> from locus.store import Store                                    # doctest: +SKIP
    >>> with Store.open(".locus") as store:  # doctest: +SKIP
    ...     router = WorkspaceRouter(store)
    ...     router.route_texts(["What is 2+2?"], top=3)[0].llm_id
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.artifact import Manifest, check_same_encoder, read_for_routing
from locus.errors import LocusInputError, LocusNotFoundError, did_you_mean
from locus.pipeline.data import workspace_table
from locus.pipeline.llm_costs import known_costs, prompt_tokens, token_prices
from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT, trained_artifact
from locus.pool import artifact_pools
from locus.routing import router_artifact
from locus.routing.costs import CostModel
from locus.routing.decision import RouteRequest, tune_cost_weight, unpriced_error
from locus.routing.locus_router import NumpyLocusRouter
from locus.routing.router import RouteDecision
from locus.routing.stacked import StackedRouter
from locus.store import Store
from locus.text.protocol import TextEncoder
from locus.text.query_vectors import QueryVectors

__all__ = ["OUTCOMES_SOURCE", "WorkspaceRouter", "tasks_read_by"]

logger = logging.getLogger("locus")

# the source of the scores learned from production outcomes (`POST /v1/outcomes`)
OUTCOMES_SOURCE = "outcomes"


class WorkspaceRouter:
    """The workspace's fitted router, loaded once and reused for every query.

    Args:
        store: the open workspace.
        artifact: name of the trained artifact under `<workspace>/artifacts/`.
        text_encoder: encoder for texts without a cached vector (default: the workspace's,
            loaded on first need, so routing known texts never loads it).
        cache_size: new texts whose vectors are kept in memory.
        outcomes: read the production outcomes of the fit's LLMs into their votes (the store's
            source `OUTCOMES_SOURCE`); False: the fit's evidence alone (what predicted them).
        outcome_max_age_s: outcomes stored longer ago than this leave the votes when they are
            read (at load and at each `refresh`); None: every outcome counts, however old.

    Attributes:
        router: the artifact's `StackedRouter` (its `guard`, `stack` and `knn`).
        pool: the workspace's live pool of LLM embeddings for the artifact.
        vectors: the query vector service (`encoded`, `cache_hits`).
        manifest: what the fit recorded (`locus.artifact.Manifest`).
        costs: USD per query of each LLM with a known cost: its mean observed cost, else the
            catalog's cost_per_query, else its per-token prices on a query of
            `DEFAULT_PROMPT_TOKENS` (may be empty).
        token_prices: the LLMs of `costs` priced by their tokens (`TokenPrices`): a routed
            text is charged its own estimated prompt tokens.
        cost_model: the artifact's per-query cost model, None for a workspace without
            per-query costs or an artifact fitted before it.
    """

    def __init__(
        self,
        store: Store,
        artifact: str = DEFAULT_ARTIFACT,
        *,
        text_encoder: TextEncoder | None = None,
        cache_size: int = 10_000,
        outcomes: bool = True,
        outcome_max_age_s: float | None = None,
    ) -> None:
        if outcome_max_age_s is not None and not outcome_max_age_s > 0:
            raise LocusInputError(
                f"outcome_max_age_s must be > 0 seconds (None: no limit), found {outcome_max_age_s}"
            )
        folder = trained_artifact(store, artifact)
        routing = read_for_routing(folder)
        check_same_encoder(folder.name, routing.text_encoder_name, store.text_encoder)
        self.manifest: Manifest = routing.manifest
        self._snapshot, self.pool = artifact_pools(
            routing.llm_ids,
            routing.llm_embeddings,
            routing.evidence_counts,
            routing.manifest,
            store,
            folder.name,
        )
        saved = router_artifact.load(folder, NumpyLocusRouter(routing.predictor, self.pool))
        self.router: StackedRouter = saved.router
        self.cost_model: CostModel | None = saved.cost_model
        self._validation_vectors: NDArray[np.float32] | None = saved.validation_vectors
        self.text_encoder_name = routing.text_encoder_name
        self.vectors = QueryVectors(
            routing.text_encoder_name,
            store.find_vectors,
            text_encoder=text_encoder,
            cache_size=cache_size,
        )
        self.store = store
        self.artifact = artifact
        self.token_prices = token_prices(store)
        self.costs = known_costs(store, self.token_prices)
        self._tuned: dict[tuple[float, frozenset[str]], float] = {}
        self._validation_proba: NDArray[np.float32] | None = None  # budgets' P(correct), per pool
        self._joined_with: dict[str, str] = {}  # LLM -> digest of the scores it joined with
        self._outcomes_read: dict[str, str] = {}  # LLM of the fit -> digest of its outcomes
        # LLMs whose evidence of the fit is dropped -> how many of their newest outcomes are
        # from since the change (None: all of them)
        self.discounted: dict[str, int | None] = {}
        self._read_outcomes = outcomes
        self.outcome_max_age_s = outcome_max_age_s
        self._join_newcomers()
        self._join_outcomes()

    @property
    def llm_ids(self) -> Sequence[str]:
        """The pool's LLMs, in the column order of `predict_proba`."""
        return self.pool.llm_ids

    def predict_proba(
        self, query_vectors: NDArray[np.float32], tasks: Sequence[str | None] | None = None
    ) -> NDArray[np.float32]:
        """The fitted router's P(correct) (n_queries, n_llms), without torch; an LLM
        onboarded since the fit has its own votes beside LOCUS's prediction, weighed by its
        number of scores (`StackedRouter.join`). `tasks`: each query's task where the caller
        knows it (one per query, None where not), read by the task vote instead of the
        tasks of the query's nearest training queries."""
        return self.router.predict_proba_given_tasks(query_vectors, tasks)

    @property
    def task_names(self) -> tuple[str, ...]:
        """The tasks the fitted router's task vote knows (a request may name one of them:
        `route_texts(tasks=)`); empty where the fit's queries carried fewer than two."""
        return tasks_read_by(self.router)

    def check_tasks(self, tasks: Sequence[str | None]) -> None:
        """Raise `LocusInputError` for a named task the router does not know."""
        known = self.task_names
        for task in tasks:
            if task is not None and task not in known:
                if not known:
                    raise LocusInputError(
                        f"task {task!r}: this router reads no task (the fit's queries carried "
                        "fewer than two tasks); route without one"
                    )
                raise LocusInputError(
                    f"unknown task {task!r}{did_you_mean(task, known)}; expected one of the "
                    f"fit's {len(known)} tasks: {', '.join(known[:12])}"
                    + (" ..." if len(known) > 12 else "")
                )

    def vectors_for(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Query vectors (n, dq) of texts (`QueryVectors`)."""
        return self.vectors(texts)

    def expected_costs(
        self, query_vectors: NDArray[np.float32], texts: Sequence[str] | None = None
    ) -> NDArray[np.float64]:
        """(n_queries, n_llms) USD each LLM of the pool is expected to cost on each query: the
        artifact's cost model where it prices the LLM, else the LLM's entry in `costs` (an LLM
        priced by its tokens on each of `texts`' own estimated prompt tokens, when given), NaN
        where neither knows."""
        vectors = np.atleast_2d(np.asarray(query_vectors, dtype=np.float32))
        ids = list(self.pool.llm_ids)
        known = np.array([self.costs.get(llm, np.nan) for llm in ids], dtype=np.float64)
        out = np.tile(known, (len(vectors), 1))
        if texts is not None and self.token_prices:
            tokens = prompt_tokens(texts)  # (n_queries,)
            for j, llm in enumerate(ids):
                if llm in self.token_prices:
                    out[:, j] = self.token_prices[llm].usd(tokens)
        if self.cost_model is not None:
            predicted = self.cost_model.predict(vectors)
            for j, llm in enumerate(ids):
                if llm in self.cost_model.llm_ids_:
                    column = predicted[:, self.cost_model.llm_ids_.index(llm)]
                    out[:, j] = np.where(np.isnan(column), out[:, j], column)
        return out

    def cost_weight_for_budget(self, budget: float, unavailable: Collection[str] = ()) -> float:
        """The cost weight whose routing of the fit's validation queries costs at most `budget`
        USD per query on average (`tune_cost_weight`), over the LLMs not `unavailable`.

        Raises:
            LocusInputError: the artifact keeps no validation queries (fitted before locus
                kept them: re-run `locus fit`), an LLM without a cost, or a budget below the
                cheapest routing.
        """
        if self._validation_vectors is None or not len(self._validation_vectors):
            raise LocusInputError(
                f"artifact {self.artifact!r} keeps no validation queries to tune a budget on "
                "(fitted by an earlier version, or without validation queries); re-run "
                "`locus fit`, or use quality or cost_weight"
            )
        key = (float(budget), frozenset(unavailable))
        if key not in self._tuned:
            down = set(unavailable)
            keep = [j for j, llm in enumerate(self.pool.llm_ids) if llm not in down]
            if self._validation_proba is None:
                self._validation_proba = self.predict_proba(self._validation_vectors)
            proba = self._validation_proba[:, keep]
            costs = self.expected_costs(self._validation_vectors)[:, keep]
            unpriced = [self.pool.llm_ids[keep[j]] for j in np.flatnonzero(np.isnan(costs).any(0))]
            if unpriced:
                raise unpriced_error("budget", unpriced)
            self._tuned[key] = tune_cost_weight(proba, costs, budget)
        return self._tuned[key]

    def route_texts(
        self,
        texts: Sequence[str],
        request: RouteRequest | None = None,
        *,
        tasks: Sequence[str | None] | None = None,
        **options: Any,
    ) -> list[RouteDecision]:
        """Route query texts by `request` (`RouteRequest`; keyword `options` build or change
        one) with each LLM's expected cost on each text (`expected_costs`) and, for accuracy
        routing unless the request says `guarded=False`, the artifact's guard (the default LLM
        unless another clears the margin chosen at fit time). A `budget` is routed as the cost
        weight tuned on the fit's validation queries (`cost_weight_for_budget`). `tasks`: each
        text's task where the caller knows it (`Router.route`).

        Raises:
            LocusInputError: a bad request, or an LLM without a cost where the rule needs one.
        """
        request = RouteRequest.of(request, **options)
        if tasks is not None:
            if len(tasks) != len(texts):
                raise LocusInputError(
                    f"tasks: expected one per text ({len(texts)}), found {len(tasks)}"
                )
            self.check_tasks(tasks)
        if request.budget is not None:
            weight = self.cost_weight_for_budget(request.budget, request.unavailable)
            request = request.with_cost_weight(weight)
        vectors = self.vectors_for(texts)
        known = self.cost_model is not None or bool(self.costs)
        costs = self.expected_costs(vectors, texts) if known else None
        return self.router.route(vectors, request, costs=costs, tasks=tasks)

    def refresh(self) -> None:
        """Re-read the pool and costs from the workspace (LLMs onboarded since loading)."""
        self.pool.refresh(self._snapshot)
        self.token_prices = token_prices(self.store)
        self.costs = known_costs(self.store, self.token_prices)
        self._tuned.clear()
        self._validation_proba = None
        self._join_newcomers()
        self._join_outcomes()

    def discount(self, llm_id: str, since_change: int | None = None) -> None:
        """From the next `refresh` on, `llm_id` (an LLM of the fit whose endpoint changed:
        `locus.routing.drift`) is read from its outcomes alone: its scores of the fit leave its
        votes (`StackedRouter.add_outcomes(forget_fit=True)`), and with `since_change` its
        outcomes but the newest `since_change` (those since the change began: the drift
        test's `outcomes - since`) and the ones posted after the call. LOCUS's embedding of
        it is not changed here."""
        if llm_id not in self.discounted:
            before = 0
            if since_change is not None and self.store.has_source(OUTCOMES_SOURCE):
                order = self.store.scores_in_order(OUTCOMES_SOURCE)
                before = max(int((order["llm_id"] == llm_id).sum()) - since_change, 0)
            self.discounted[llm_id] = before
        self._outcomes_read.pop(llm_id, None)

    def _join_outcomes(self) -> None:
        """The production outcomes of the fit's LLMs (the store's source `OUTCOMES_SOURCE`)
        join their votes, each one more scored query of its LLM (`StackedRouter.add_outcomes`;
        an LLM joined since the fit reads them with its other scores), those older than
        `outcome_max_age_s` left out (and dropped where read before). Read again only for an
        LLM whose outcomes changed."""
        knn = self.router.knn
        if knn is None or not self._read_outcomes:
            return
        if not self.store.has_source(OUTCOMES_SOURCE):
            return  # no outcome yet: nothing to read (and no scan of every score at load)
        fitted = set(knn.llm_ids) - set(self.router.joined)
        table = self.store.score_table(sources=[OUTCOMES_SOURCE])
        if table.n_llms == 0 or not fitted & set(table.llm_ids):
            return
        try:
            vectors = self.store.get_vectors(self.text_encoder_name, list(table.text_hashes))
        except LocusNotFoundError as error:  # posted outcomes are encoded when stored
            logger.warning("outcomes not read into routing yet: %s", error)
            return
        recent = self._recent_outcomes()
        for llm in sorted(fitted & set(table.llm_ids)):
            column = table.scores[:, table.llm_index(llm)]
            rows = np.flatnonzero(~np.isnan(column))
            hashes = np.asarray(table.text_hashes, dtype=str)[rows]
            if self.discounted.get(llm):  # its outcomes from before the change go too
                rows, hashes = self._among(rows, hashes, self._since_change(llm))
            if recent is not None:  # and those too old
                rows, hashes = self._among(rows, hashes, recent.get(llm, np.array([], str)))
            digest = hashlib.sha256(rows.tobytes() + column[rows].tobytes()).hexdigest()
            unread = not len(rows) and llm not in self._outcomes_read
            if unread or self._outcomes_read.get(llm) == digest:
                continue
            self._outcomes_read[llm] = digest
            only_these = bool(self.discounted.get(llm)) or recent is not None
            self.router.add_outcomes(
                llm, vectors[rows], column[rows], [table.tasks[i] for i in rows],
                forget_fit=llm in self.discounted, keep_earlier=0 if only_these else None,
            )  # fmt: skip

    @staticmethod
    def _among(
        rows: NDArray[np.intp], hashes: NDArray[np.str_], wanted: NDArray[np.str_]
    ) -> tuple[NDArray[np.intp], NDArray[np.str_]]:
        keep = np.isin(hashes, wanted)
        return rows[keep], hashes[keep]

    def _recent_outcomes(self) -> dict[str, NDArray[np.str_]] | None:
        """Per LLM, the text hashes of its outcomes stored within `outcome_max_age_s` (None:
        no age limit)."""
        if self.outcome_max_age_s is None:
            return None
        import pandas as pd

        order = self.store.scores_in_order(OUTCOMES_SOURCE)
        stored = pd.to_datetime(order["imported_at"], utc=True, format="ISO8601")
        cutoff = pd.Timestamp.now(tz="UTC") - pd.Timedelta(seconds=self.outcome_max_age_s)
        fresh = order[(stored >= cutoff).to_numpy()]
        return {
            str(llm): np.asarray(group["text_hash"], dtype=str)
            for llm, group in fresh.groupby("llm_id")
        }

    def _since_change(self, llm_id: str) -> NDArray[np.str_]:
        """The text hashes of `llm_id`'s outcomes after the first `discounted[llm_id]` (those
        from before its endpoint changed), in the order they were stored."""
        order = self.store.scores_in_order(OUTCOMES_SOURCE)
        mine = order[order["llm_id"] == llm_id]
        return np.asarray(mine["text_hash"].iloc[self.discounted[llm_id] or 0 :], dtype=str)

    def _join_newcomers(self) -> None:
        """LLMs of the pool onboarded since the fit join the router's votes from their own
        scores in the workspace (outside the test split, as their embeddings were computed;
        `StackedRouter.join`), the guard's default's scores on the same queries beside them;
        one joined before whose scores changed (outcomes, more probes) is read again."""
        knn = self.router.knn
        if knn is None:
            return
        fitted = set(knn.llm_ids) - set(self.router.joined)
        newcomers = [llm for llm in self.pool.llm_ids if llm not in fitted]
        if not newcomers:
            return
        guard = self.router.guard
        default = [guard.default] if guard is not None and guard.default in fitted else []
        data = workspace_table(
            self.store, split_seed=self.manifest.split_seed, llm_ids=newcomers + default
        )
        table, outside_test = data.table, data.splits != "test"
        held = table.scores[:, table.llm_index(default[0])] if default else None
        for llm in newcomers:
            if llm not in table.llm_ids:
                continue  # an embedding without scores in the workspace: LOCUS alone
            column = table.scores[:, table.llm_index(llm)]
            rows = np.flatnonzero(~np.isnan(column) & outside_test)
            digest = hashlib.sha256(rows.tobytes() + column[rows].tobytes()).hexdigest()
            if not len(rows) or self._joined_with.get(llm) == digest:
                continue  # no scores, or joined already with these
            self._joined_with[llm] = digest
            self.router.join(
                llm,
                data.vectors[rows],
                column[rows],
                [table.tasks[i] for i in rows],
                default_scores=None if held is None else held[rows],
            )


def tasks_read_by(router: StackedRouter) -> tuple[str, ...]:
    """The tasks `router`'s task vote knows; empty where its fit's queries carried fewer than
    two, or it has no stack that reads them."""
    knn, stack = router.knn, router.stack
    vote = None if knn is None else knn.task_vote_
    return () if vote is None or stack is None or not stack.tasks else vote.names
