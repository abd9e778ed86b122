"""`WorkspaceAtlas`: a workspace's pool as arrays for the atlas, loaded once.

It reads the artifact's pool (the LLM embeddings, through the torch-free `WorkspaceRouter`),
the scores on the test split (never part of any embedding's evidence, so agreement measured
there is honest), the router's P(correct) on those queries and the LLMs' metadata. Every atlas
command is one method here over numpy arrays.

    >>> with Store.open(".locus") as store:                              # doctest: +SKIP
    ...     atlas = WorkspaceAtlas(store)
    ...     atlas.similar("gpt-4o", k=3)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.distance import cdist

from locus.atlas.clusters import Clustering, best_k, family_agreement, hierarchical, kmeans
from locus.atlas.fingerprint import (
    Embedder,
    FingerprintDraw,
    draw_fingerprints,
    profile_loglik,
    task_rates,
)
from locus.atlas.geometry import (
    GeometryReport,
    agreement_matrix,
    distance_matrix,
    geometry_report,
    nearest,
)
from locus.atlas.portfolio import (
    BudgetPortfolio,
    budget_cover,
    k_center,
    k_medoids,
    portfolio_accuracy,
)
from locus.atlas.proxy import ProxyRetention, predicted_agreement, proxy_retention
from locus.atlas.search import capability_recall, synthesise_evidence, task_profiles
from locus.data.families import Family, family_from, family_of
from locus.errors import LocusInputError, LocusNotFoundError, did_you_mean
from locus.metrics import column_means, routing_choices
from locus.pipeline.data import WorkspaceTable, workspace_table
from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT
from locus.pipeline.workspace_router import WorkspaceRouter
from locus.store import Store

__all__ = ["WorkspaceAtlas"]


class WorkspaceAtlas:
    """The pool of one artifact, with what the atlas measures it against.

    Args:
        store: the open workspace.
        artifact: the trained artifact whose embeddings are mapped.
        metric: distance between embeddings ("euclidean", the paper's, or "cosine").
        embed: what embeds new evidence (fingerprinting, capability search); the facade's
            `Locus.embed_many`, passed in so that the atlas never imports torch.

    Attributes:
        llm_ids: (n_llms,) the LLMs with an embedding and scores in the workspace.
        embeddings: (n_llms, d).
        test_scores, test_proba: (n_test, n_llms) scores (NaN = not scored) and the router's
            P(correct) on the test split.
        accuracy: (n_llms,) mean score on the non-test queries.
        metadata: per LLM, the metadata fields set for it.
        family: per LLM, its `Family` (`locus.data.families.family_from`: the catalog's,
            else a guess from its name, said as one): what every view shows.
        catalog_families: per LLM, its family in the LLM catalog (`locus import llms`), None
            where the catalog gives none.
        guessed_families: per LLM, the family its name suggests (`locus.data.families`).
        families: per LLM, its catalog family, else the guess from its name.
    """

    def __init__(
        self,
        store: Store,
        artifact: str = DEFAULT_ARTIFACT,
        *,
        metric: str = "euclidean",
        embed: Embedder | None = None,
    ) -> None:
        self.router = WorkspaceRouter(store, artifact)
        self.store = store
        self.artifact = artifact
        self.metric = metric
        self._embed = embed
        split_seed = self.router.manifest.split_seed
        self.data: WorkspaceTable = workspace_table(store, split_seed=split_seed)
        columns = {llm: i for i, llm in enumerate(self.data.table.llm_ids)}
        self.llm_ids = [llm for llm in self.router.pool.llm_ids if llm in columns]
        if len(self.llm_ids) < 2:
            raise LocusInputError(
                f"the atlas needs at least 2 LLMs with embeddings and scores; found "
                f"{len(self.llm_ids)}"
            )
        self.embeddings = self.router.pool.vectors(self.llm_ids).astype(np.float64)
        self._index = {llm: i for i, llm in enumerate(self.llm_ids)}
        self._columns = np.array([columns[llm] for llm in self.llm_ids])
        scores = self.data.table.scores[:, self._columns].astype(np.float64)
        test = self.data.rows("test")
        self.test_scores = scores[test]
        pool_column = {llm: i for i, llm in enumerate(self.router.pool.llm_ids)}
        proba = self.router.predict_proba(self.data.vectors[test])
        self.test_proba = np.asarray(proba)[:, [pool_column[llm] for llm in self.llm_ids]]
        evidence = np.where(self.data.splits[:, None] == "test", np.nan, scores)
        self.accuracy = column_means(evidence)  # NaN: an LLM without a non-test score
        stored = store.llm_metadata()
        self.metadata = [dict(stored.get(llm, {})) for llm in self.llm_ids]
        self.family: list[Family] = [
            family_from(llm, m) for llm, m in zip(self.llm_ids, self.metadata, strict=True)
        ]
        self.catalog_families = [None if f.guessed else f.name for f in self.family]
        self.guessed_families = [family_of(llm) for llm in self.llm_ids]
        self.families = [f.name for f in self.family]
        self.families_from_metadata = any(self.catalog_families)

    def _items(self) -> list[tuple[str, dict[str, Any]]]:
        return list(zip(self.llm_ids, self.metadata, strict=True))

    # -- lookups ---------------------------------------------------------------------------

    def index(self, llm_id: str) -> int:
        try:
            return self._index[llm_id]
        except KeyError:
            raise LocusNotFoundError(
                f"unknown LLM {llm_id!r}{did_you_mean(llm_id, self.llm_ids)}; expected an LLM "
                "of the atlas (see `locus llms`)"
            ) from None

    @property
    def embed(self) -> Embedder:
        if self._embed is None:
            raise LocusInputError("this atlas was opened without an embedder (pass embed=...)")
        return self._embed

    def distances(self, metric: str | None = None) -> NDArray[np.float64]:
        """(n_llms, n_llms) distances between the LLM embeddings."""
        metric = metric or self.metric
        if metric not in self._distances:
            self._distances[metric] = distance_matrix(self.embeddings, metric)
        return self._distances[metric]

    @cached_property
    def _distances(self) -> dict[str, NDArray[np.float64]]:
        return {}

    @cached_property
    def agreement(self) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """Measured agreement on shared test queries, and how many they share."""
        return agreement_matrix(self.test_scores)

    @cached_property
    def predicted_agreement(self) -> NDArray[np.float64]:
        return predicted_agreement(self.test_proba)

    # -- commands --------------------------------------------------------------------------

    def similar(
        self, llm_id: str, k: int = 5, *, exclude: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """The k LLMs nearest to `llm_id`: distance, measured agreement on the test queries
        both were scored on (and how many), and the agreement the predictor expects."""
        i = self.index(llm_id)
        allowed = np.ones(len(self.llm_ids), dtype=bool)
        for other in exclude:
            allowed[self.index(other)] = False
        agreement, shared = self.agreement
        distances = self.distances()
        return [
            {
                "llm_id": self.llm_ids[j],
                "distance": float(distances[i, j]),
                "agreement": None if shared[i, j] == 0 else float(agreement[i, j]),
                "shared_queries": int(shared[i, j]),
                "predicted_agreement": float(self.predicted_agreement[i, j]),
                "family": self.family[j].name,
                "family_source": self.family[j].source,
            }
            for j in nearest(distances, i, k, allowed=allowed)
        ]

    def geometry(self, metric: str | None = None, max_k: int = 20) -> GeometryReport:
        agreement, shared = self.agreement
        return geometry_report(
            self.distances(metric), agreement, shared, metric=metric or self.metric, max_k=max_k
        )

    def clusters(
        self,
        *,
        k: int | None = None,
        threshold: float | None = None,
        method: str = "hierarchical",
        seed: int = 0,
    ) -> Clustering:
        """Clusters of the pool (k chosen by silhouette when neither k nor threshold is given;
        hierarchical clustering is average-linkage on the atlas's metric)."""
        if k is not None and threshold is not None:
            raise LocusInputError("cluster: expected --k or --threshold, not both")
        if method == "kmeans":
            if threshold is not None:
                raise LocusInputError("cluster: --threshold cuts a hierarchy; use --k with kmeans")
            return kmeans(
                self.embeddings, k or best_k(self.embeddings, metric=self.metric), seed=seed
            )
        if method != "hierarchical":
            raise LocusInputError(f"cluster method {method!r}: expected hierarchical or kmeans")
        if k is None and threshold is None:
            k = best_k(self.embeddings, metric=self.metric)
        return hierarchical(self.embeddings, k=k, threshold=threshold, metric=self.metric)

    def family_agreement(self, clustering: Clustering) -> float:
        return family_agreement(clustering.labels, self.families)

    def portfolio(self, k: int, method: str = "k-center") -> list[int]:
        """k LLMs (row indices) chosen from the embeddings alone, around the LLM with the best
        mean score on its evidence (known without any new evaluation): k-center starts from
        it, k-medoids keeps it as a medoid (pure PAM left routing on MMLU-Pro at 0.49 with 2
        LLMs, against 0.71 with it kept)."""
        distances = self.distances()
        best = int(np.nanargmax(self.accuracy))
        if method == "k-center":
            return k_center(distances, k, first=best)
        if method == "k-medoids":
            return k_medoids(distances, k, fixed=[best])
        raise LocusInputError(f"portfolio method {method!r}: expected k-center or k-medoids")

    def budget_portfolio(
        self, *, max_params: float | None = None, max_usd: float | None = None
    ) -> BudgetPortfolio:
        """Greedy coverage under a total parameter count or total USD per query."""
        if (max_params is None) == (max_usd is None):
            raise LocusInputError("portfolio: expected one budget, --max-params or --max-usd")
        costs = self.params() if max_params is not None else self.usd_per_query()
        if not np.isfinite(costs).any():
            field = "params_b" if max_params is not None else "cost_per_query (or scores' cost_usd)"
            raise LocusInputError(
                f"no LLM of the pool has {field}; import LLM metadata to budget with it"
            )
        budget = max_params if max_params is not None else max_usd
        assert budget is not None
        affordable = np.where(np.isfinite(costs) & (costs <= budget), self.accuracy, -np.inf)
        first = int(np.argmax(affordable)) if np.isfinite(affordable).any() else None
        return budget_cover(self.distances(), costs, budget, first=first)

    def params(self) -> NDArray[np.float64]:
        """(n_llms,) parameter counts (not billions), NaN where unknown."""
        return np.array(
            [float(m["params_b"]) * 1e9 if "params_b" in m else np.nan for m in self.metadata]
        )

    def usd_per_query(self) -> NDArray[np.float64]:
        """(n_llms,) USD per query: metadata's cost_per_query, else the mean observed cost."""
        observed = self.router.costs
        return np.array(
            [
                float(m["cost_per_query"]) if "cost_per_query" in m else observed.get(llm, np.nan)
                for llm, m in self._items()
            ]
        )

    def portfolio_accuracy(self, members: Sequence[int]) -> float:
        return portfolio_accuracy(self.test_proba, self.test_scores, members)

    def full_pool_accuracy(self) -> float:
        return portfolio_accuracy(self.test_proba, self.test_scores, range(len(self.llm_ids)))

    def proxies(self, llm_id: str, k: int = 5, *, by: str = "distance") -> list[dict[str, Any]]:
        """Substitutes for `llm_id` when it is down.

        `by="distance"`: nearest by embedding distance. `by="predicted"`: the LLMs the
        predictor would send its queries to instead, ranked by their mean P(correct) on the
        test queries routed to `llm_id` (all test queries when none is); each row then also
        has that mean (`p_correct`) and the mean measured score there (`measured`).
        """
        if by == "distance":
            return self.similar(llm_id, k)
        if by != "predicted":
            raise LocusInputError(f"proxies by {by!r}: expected distance or predicted")
        i = self.index(llm_id)
        routed = routing_choices(self.test_proba, self.test_scores) == i
        rows = routed if routed.any() else np.ones(len(self.test_proba), dtype=bool)
        p_correct = self.test_proba[rows].mean(axis=0)
        # an onboarded LLM has no test scores: its measured mean is None, not a warning
        measured = column_means(self.test_scores[rows])
        ranked = {row["llm_id"]: row for row in self.similar(llm_id, len(self.llm_ids) - 1)}
        order = [j for j in np.argsort(-p_correct, kind="stable") if j != i][:k]
        return [
            {
                **ranked[self.llm_ids[j]],
                "p_correct": float(p_correct[j]),
                "measured": None if np.isnan(measured[j]) else float(measured[j]),
                "queries": int(rows.sum()),
            }
            for j in order
        ]

    def retention(self) -> ProxyRetention:
        return proxy_retention(self.test_proba, self.test_scores, self.distances())

    def evidence_rows(self, split: str | None = None) -> NDArray[np.int64]:
        """Row indices of the workspace table (all, or one split)."""
        return np.arange(len(self.data.splits)) if split is None else self.data.rows(split)

    def scores(self) -> NDArray[np.float64]:
        """(n_queries, n_llms) every score of the atlas's LLMs, in workspace-table rows."""
        return self.data.table.scores[:, self._columns].astype(np.float64)

    # -- fingerprinting and capability search (need `embed`) -------------------------------

    def fingerprint_draw(self, k: int, *, seed: int = 0) -> FingerprintDraw:
        """References from each LLM's scores on one half of the pool's queries, probes from k
        of its scores on the other half (see `locus.atlas.fingerprint`)."""
        return draw_fingerprints(
            self.scores(),
            self.data.vectors,
            self.task_index(),
            self.llm_ids,
            self.embed,
            k=k,
            seed=seed,
            metric=self.metric,
        )

    def max_probe(self) -> int:
        """The largest probe size every LLM but a few can give on half of the pool's queries."""
        counts = (~np.isnan(self.scores())).sum(axis=0)
        return max(8, int(np.quantile(counts, 0.25)) // 2)

    def tasks(self) -> NDArray[np.str_]:
        """(n_queries,) task of each workspace-table row ("" = none)."""
        return np.array([t or "" for t in self.data.table.tasks])

    def task_index(self) -> NDArray[np.int64]:
        """(n_queries,) each workspace-table row's task as an index into its sorted tasks."""
        return np.unique(self.tasks(), return_inverse=True)[1].astype(np.int64)

    def search(
        self, profile: Mapping[str, float], *, top: int = 10, n: int = 8192, seed: int = 0
    ) -> list[dict[str, Any]]:
        """The real LLMs whose measured per-task rates (non-test queries) best explain
        synthetic evidence with `profile`'s rates (the per-task likelihood of
        `locus.atlas.fingerprint`: a profile equal to an LLM's measured one finds it first),
        with each one's embedding distance to that evidence and its measured rates."""
        tasks = self.tasks()
        rows, scores = synthesise_evidence(
            profile, tasks, n, seed=seed, rows=self.evidence_rows("train")
        )
        probe = np.asarray(self.embed([(self.data.vectors[rows], scores)]), dtype=np.float64)
        d = cdist(probe, self.embeddings, metric=self.metric)[0]
        evidence = np.where(self.data.splits[:, None] == "test", np.nan, self.scores())
        index = self.task_index()
        rates = task_rates(evidence, index, int(index.max()) + 1)
        fit = profile_loglik(rates, index[rows], scores)
        measured = task_profiles(evidence, tasks)
        order = np.lexsort((np.arange(len(fit)), -fit))[:top]
        return [
            {
                "llm_id": self.llm_ids[i],
                "loglik": float(fit[i]),
                "distance": float(d[i]),
                "measured": {task: measured[i].get(task) for task in profile},
            }
            for i in order
        ]

    def recall(
        self, *, n: int = 8192, ks: Sequence[int] = (1, 5, 10), seed: int = 0
    ) -> dict[str, Any]:
        """Capability-search recall@k of every LLM from its own per-task profile."""
        tasks = self.tasks()
        train = self.evidence_rows("train")
        profiles = task_profiles(self.scores()[train], tasks[train])
        profiles = [{t: r for t, r in p.items() if t} for p in profiles]
        return capability_recall(
            profiles,
            tasks,
            self.data.vectors,
            self.embeddings,
            self.embed,
            n=n,
            ks=ks,
            seed=seed,
            rows=train,
            metric=self.metric,
        )
