"""`WorkspaceRouter`: a long-lived router over a workspace, everything loaded once.

It holds the artifact's predictor (in numpy: routing never imports torch, see
`locus.inference`), the workspace's pool, the LLMs' costs and (on first need) the text encoder,
and routes any number of query texts: `locus route --file` uses it, and so will the HTTP
service. A text already in the store (normalised exactly as at import) uses its cached vector;
new texts are encoded and kept in a bounded in-memory cache.

    >>> from locus.store import Store                                    # doctest: +SKIP
    >>> with Store.open(".locus") as store:
    ...     router = WorkspaceRouter(store)
    ...     router.route_texts(["What is 2+2?"], top=3)[0].llm_id
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from locus.calibration import evidence_quality_of, sigmoid
from locus.data.text import text_hash
from locus.errors import LocusArtifactError, LocusInputError, LocusNotFoundError
from locus.inference import check_same_encoder, read_for_routing
from locus.pool import artifact_pools
from locus.routing.base import RouteDecision, Router
from locus.routing.costs import COST_FOLDER, CostModel
from locus.routing.ensemble import ENSEMBLE_FOLDER, Stack, mix
from locus.routing.evidence import ROUTER_FILE
from locus.routing.guard import Guard
from locus.routing.neighbours import KNNRouter
from locus.routing.rules import DecisionRule, tune_cost_weight, unpriced_error
from locus.store import Store
from locus.text.base import TextEncoder

__all__ = [
    "DEFAULT_ARTIFACT",
    "WorkspaceRouter",
    "artifact_path",
    "publish_artifact",
    "trained_artifact",
]

DEFAULT_ARTIFACT = "default"


class WorkspaceRouter(Router):
    """LOCUS routing over a workspace's pool, loaded once and reused for every query.

    Args:
        store: the open workspace.
        artifact: name of the trained artifact under `<workspace>/artifacts/`.
        text_encoder: encoder for texts without a cached vector (default: the workspace's,
            loaded on first need, so routing known texts never loads it).
        cache_size: new texts whose vectors are kept in memory.

    Attributes:
        costs: USD per query of each LLM with a known cost: its mean observed cost, else the
            catalog's cost_per_query (may be empty).
        cost_model: the artifact's per-query cost model (`locus.routing.costs`), None for a
            workspace without per-query costs or an artifact fitted before it.
        guard: the artifact's routing guard (`locus.routing.guard`), None for an artifact
            fitted without one.
        stack: how LOCUS is combined with the artifact's kNN router (`locus.routing.ensemble`;
            None: LOCUS alone, or an earlier version's mixture); ensemble_weight: that
            mixture's LOCUS share (None unless the artifact has one); `metadata`: the
            artifact's.
        loads: how many times the artifact was loaded (1 for the router's lifetime).
        encoded, cache_hits: texts encoded, texts served from the store or the memory cache.
    """

    def __init__(
        self,
        store: Store,
        artifact: str = DEFAULT_ARTIFACT,
        *,
        text_encoder: TextEncoder | None = None,
        cache_size: int = 10_000,
    ) -> None:
        folder = trained_artifact(store, artifact)
        routing = read_for_routing(folder)
        check_same_encoder(folder.name, routing.text_encoder_name, store.text_encoder)
        self.predictor = routing.predictor
        self.text_encoder_name = routing.text_encoder_name
        self._snapshot, self.pool = artifact_pools(
            routing.llm_ids,
            routing.llm_embeddings,
            routing.evidence_counts,
            routing.metadata,
            store,
            folder.name,
        )
        self.store = store
        self.artifact = artifact
        self.costs = _known_costs(store)
        self.cost_model: CostModel | None = None
        self._validation_vectors: NDArray[np.float32] | None = None
        if (folder / COST_FOLDER / ROUTER_FILE).exists():
            self.cost_model = CostModel.load(folder / COST_FOLDER)
        if (folder / COST_FOLDER).is_dir():
            self._validation_vectors = CostModel.validation_vectors(folder / COST_FOLDER)
        self._tuned: dict[tuple[float, frozenset[str]], float] = {}
        guard = routing.metadata.get("guard")
        self.guard = None if not guard else Guard.from_dict(guard)
        self.metadata = routing.metadata
        self.ensemble_weight: float | None = None
        self.stack: Stack | None = None
        self._knn: Router | None = None
        ensemble = routing.metadata.get("ensemble")
        if ensemble:
            from locus.routing.registry import load_router

            self._knn = load_router(folder / str(ensemble.get("folder", ENSEMBLE_FOLDER)))
            if ensemble.get("stack"):
                if not isinstance(self._knn, KNNRouter):
                    raise LocusArtifactError(
                        f"{folder}: the stack's kNN part is a {type(self._knn).__name__}, "
                        "expected a kNN router; re-run locus fit"
                    )
                self.stack = Stack.from_dict(ensemble["stack"])
            else:  # an artifact of an earlier version: a mixture of probabilities
                self.ensemble_weight = float(ensemble["weight"])
            self._knn_column = {llm: i for i, llm in enumerate(self._knn.llm_ids)}
        self.loads = 1
        self.encoded = 0
        self.cache_hits = 0
        self._text_encoder = text_encoder
        self._cache: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._cache_size = cache_size

    @property
    def text_encoder(self) -> TextEncoder:
        """The text encoder, loaded on first use (the one the workspace was encoded with)."""
        if self._text_encoder is None:
            from locus.text import get_text_encoder

            self._text_encoder = get_text_encoder(self.text_encoder_name)
        if self._text_encoder.name != self.text_encoder_name:
            raise LocusInputError(
                f"text encoder {self._text_encoder.name!r} differs from the artifact's "
                f"({self.text_encoder_name!r}); use that encoder"
            )
        return self._text_encoder

    @property
    def llm_ids(self) -> Sequence[str]:  # type: ignore[override]
        return self.pool.llm_ids

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        """P(correct) (n_queries, n_llms) for query vectors (n_queries, dq), without torch:
        LOCUS's, combined with the artifact's kNN router's where it has one (`stack`, or an
        earlier version's mixture), for the LLMs the kNN router was fitted on; an LLM onboarded
        since has LOCUS's alone until the next fit."""
        vectors = np.asarray(query_vectors, dtype=np.float32)
        logits = self.predictor.predict_logits(
            self.pool.embeddings,
            vectors,
            evidence_quality_of(self.pool.evidence_means, self.pool.llm_ids),
        )
        proba = sigmoid(logits).astype(np.float32)
        if self._knn is None:
            return proba
        pairs = [
            (j, self._knn_column[llm])
            for j, llm in enumerate(self.pool.llm_ids)
            if llm in self._knn_column
        ]
        if not pairs:
            return proba
        mine, theirs = (list(side) for side in zip(*pairs, strict=True))
        if self.stack is not None and isinstance(self._knn, KNNRouter):
            needed = self.stack.needed_ks
            found = self._knn.predict_proba_at(vectors, needed)
            votes = {k: part[:, theirs] for k, part in zip(needed, found, strict=True)}
            combined = self.stack.logits(logits[:, mine], votes)
            proba[:, mine] = sigmoid(combined)
        elif self.ensemble_weight is not None:
            knn_proba = np.asarray(self._knn.predict_proba(vectors))
            proba[:, mine] = mix(proba[:, mine], knn_proba[:, theirs], self.ensemble_weight)
        return proba

    def vectors_for(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Query vectors (n, dq) of texts: cached in the store or memory, else encoded."""
        empty = [i for i, text in enumerate(texts) if not str(text).strip()]
        if empty:
            raise LocusInputError(f"query {empty[0]} is empty; expected query text to route")
        hashes = [text_hash(str(text)) for text in texts]
        found: dict[str, NDArray[np.float32]] = {}
        for h in hashes:
            if h in self._cache:
                self._cache.move_to_end(h)
                found[h] = self._cache[h]
        wanted = [h for h in dict.fromkeys(hashes) if h not in found]
        if wanted:
            found.update(self.store.find_vectors(self.text_encoder_name, wanted))
        self.cache_hits += sum(1 for h in hashes if h in found)
        first_of: dict[str, int] = {}
        for i, h in enumerate(hashes):
            if h not in found:
                first_of.setdefault(h, i)  # a text repeated in one call is encoded once
        if first_of:
            fresh = np.asarray(
                self.text_encoder.encode([str(texts[i]) for i in first_of.values()]),
                dtype=np.float32,
            )
            self.encoded += len(first_of)
            for row, h in enumerate(first_of):
                found[h] = fresh[row]
                self._remember(h, fresh[row])
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)

    def _remember(self, key: str, vector: NDArray[np.float32]) -> None:
        self._cache[key] = vector
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def expected_costs(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float64]:
        """(n_queries, n_llms) USD each LLM of the pool is expected to cost on each query: the
        artifact's cost model where it prices the LLM, else the LLM's entry in `costs`, NaN
        where neither knows."""
        vectors = np.atleast_2d(np.asarray(query_vectors, dtype=np.float32))
        ids = list(self.pool.llm_ids)
        known = np.array([self.costs.get(llm, np.nan) for llm in ids], dtype=np.float64)
        out = np.tile(known, (len(vectors), 1))
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
            proba = self.predict_proba(self._validation_vectors)[:, keep]
            costs = self.expected_costs(self._validation_vectors)[:, keep]
            unpriced = [self.pool.llm_ids[keep[j]] for j in np.flatnonzero(np.isnan(costs).any(0))]
            if unpriced:
                raise unpriced_error("budget", unpriced)
            self._tuned[key] = tune_cost_weight(proba, costs, budget)
        return self._tuned[key]

    def route_texts(
        self,
        texts: Sequence[str],
        *,
        top: int = 3,
        cost_weight: float = 0.0,
        max_cost: float | None = None,
        quality: float | None = None,
        budget: float | None = None,
        unavailable: Collection[str] = (),
        guarded: bool = True,
    ) -> list[RouteDecision]:
        """Route query texts with each LLM's expected cost on each (`expected_costs`) and,
        for accuracy routing unless `guarded` is False, the artifact's guard (the default LLM
        unless another clears the margin chosen at fit time). `budget`: a mean USD per query
        to stay under, as the cost weight tuned on the fit's validation queries
        (`cost_weight_for_budget`); see `Router.route` for the other knobs.

        Raises:
            LocusInputError: more than one of cost_weight, quality and budget, a bad value, or
                an LLM without a cost where the rule needs one.
        """
        DecisionRule(cost_weight=cost_weight, quality=quality, budget=budget)  # one, valid
        if budget is not None:
            cost_weight = self.cost_weight_for_budget(budget, unavailable)
        vectors = self.vectors_for(texts)
        known = self.cost_model is not None or bool(self.costs)
        return self.route(
            vectors,
            top=top,
            costs=self.expected_costs(vectors) if known else None,
            cost_weight=cost_weight,
            max_cost=max_cost,
            quality=quality,
            unavailable=unavailable,
            guard=self.guard if guarded and budget is None else None,
        )

    def refresh(self) -> None:
        """Re-read the pool and costs from the workspace (LLMs onboarded since loading)."""
        self.pool.refresh(self._snapshot)
        self.costs = _known_costs(self.store)
        self._tuned.clear()


def _known_costs(store: Store) -> dict[str, float]:
    """USD per query of each LLM: its mean observed cost, else its catalog cost_per_query."""
    costs = store.llm_costs()
    for llm, metadata in store.llm_metadata().items():
        if llm not in costs and metadata.get("cost_per_query") is not None:
            costs[llm] = float(metadata["cost_per_query"])
    return costs


def artifact_path(store: Store, name: str) -> Path:
    """`<workspace>/artifacts/<name>`, with the name checked."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise LocusInputError(f"artifact name {name!r}: expected a plain name such as 'default'")
    return store.artifacts_dir / name


def trained_artifact(store: Store, name: str) -> Path:
    """`artifact_path`, which must hold a trained artifact; where the store keeps artifacts in
    the database, the local copy is fetched first when the database holds a newer one.

    Raises:
        LocusNotFoundError: nothing trained under that name (run `locus fit`).
    """
    path = artifact_path(store, name)
    if store.artifacts_in_database:
        store.fetch_artifact(name, path)
    elif not path.exists():
        raise LocusNotFoundError(
            f"no trained artifact {name!r} in {store.artifacts_dir}; run `locus fit` first"
        )
    return path


def publish_artifact(store: Store, name: str) -> None:
    """After the artifact folder `name` is written: where the store keeps artifacts in the
    database, store it there for every process sharing the store (a SQLite workspace's folder
    is already where its readers look)."""
    if store.artifacts_in_database:
        store.put_artifact(name, artifact_path(store, name))
