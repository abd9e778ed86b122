"""`LLMPool`: the LLM embeddings of one artifact, in one place.

A pool is who is on the map (llm_ids), where each LLM sits (its embedding) and from how much
evidence it was computed. Without a workspace it lives in memory (an artifact's fit-time
snapshot). Bound to a workspace it is the workspace's `llm_embeddings` rows for the artifact:
the facade, the CLI and the pipeline all read it there, and onboarding or refining an LLM writes
it there, in one transaction per change. See docs/architecture.md, "artifact and workspace".

    >>> import numpy as np
    >>> pool = LLMPool(["a", "b"], np.zeros((2, 4), np.float32), [10, 20])
    >>> pool.upsert("c", np.ones(4, np.float32), 5) is None       # new: no previous vector
    True
    >>> pool.llm_ids, pool.vectors(["c"]).shape
    (['a', 'b', 'c'], (1, 4))
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from locus.artifact.layout import check_same_encoder
from locus.artifact.manifest import Manifest
from locus.data.table import ScoreTable
from locus.errors import LocusInputError, LocusNotFoundError, did_you_mean

if TYPE_CHECKING:
    import os

    from locus.store import Store

__all__ = ["LLMPool", "artifact_pools", "open_artifact_workspace", "workspace_pools"]

logger = logging.getLogger(__name__)


class LLMPool:
    """LLM embeddings (n_llms, d) with their llm_ids and evidence counts.

    Args:
        llm_ids: (n_llms,) names, unique.
        embeddings: (n_llms, d) float32.
        evidence_counts: (n_llms,) scores each embedding was computed from.
        store, artifact: bind the pool to a workspace: every change is written to `store`
            under the artifact name `artifact`.
        evidence_means: {llm_id: (mean score, count)} of the evidence each embedding came
            from, where known (the calibration's evidence quality); kept with the embeddings.
    """

    def __init__(
        self,
        llm_ids: Sequence[str],
        embeddings: ArrayLike,
        evidence_counts: Sequence[int] | NDArray[np.integer],
        *,
        store: Store | None = None,
        artifact: str | None = None,
        evidence_means: Mapping[str, tuple[float, int]] | None = None,
    ) -> None:
        if (store is None) != (artifact is None):
            raise LocusInputError("a pool bound to a workspace needs both store and artifact")
        self._store = store
        self.artifact = artifact
        self.evidence_means: dict[str, tuple[float, int]] = dict(evidence_means or {})
        self._set(llm_ids, embeddings, evidence_counts)

    def _set(
        self,
        llm_ids: Sequence[str],
        embeddings: ArrayLike,
        evidence_counts: Sequence[int] | NDArray[np.integer],
    ) -> None:
        ids = [str(llm) for llm in llm_ids]
        vectors = np.array(embeddings, dtype=np.float32, copy=True)
        counts = np.array(evidence_counts, dtype=np.int64, copy=True)
        if vectors.ndim != 2 or len(vectors) != len(ids) or counts.shape != (len(ids),):
            raise LocusInputError(
                f"a pool needs ({len(ids)}, d) embeddings and {len(ids)} evidence counts; found "
                f"{vectors.shape} and {counts.shape}"
            )
        if len(set(ids)) != len(ids):
            raise LocusInputError("llm_ids of a pool must be unique")
        self.llm_ids = ids
        self.embeddings = vectors
        self.evidence_counts = counts
        self._index = {llm: i for i, llm in enumerate(ids)}

    @classmethod
    def from_anchors(
        cls, table: ScoreTable, embeddings: ArrayLike, anchor_rows: Sequence[ArrayLike]
    ) -> LLMPool:
        """The fit-time pool: each LLM of `table` (columns in order) with its embedding, the
        number of its anchor rows `anchor_rows[j]` and its mean score on them."""
        indices = [np.asarray(rows, dtype=np.int64) for rows in anchor_rows]
        means = {
            llm_id: (float(np.nanmean(table.scores[rows, j])), len(rows))
            for j, (llm_id, rows) in enumerate(zip(table.llm_ids, indices, strict=True))
            if len(rows)
        }
        return cls(
            table.llm_ids,
            np.asarray(embeddings, dtype=np.float32),
            [len(rows) for rows in indices],
            evidence_means=means,
        )

    @classmethod
    def from_store(
        cls,
        store: Store,
        artifact: str,
        snapshot: LLMPool | None = None,
        *,
        fit_id: str | None = None,
    ) -> LLMPool:
        """The workspace's pool for `artifact`, bound to `store`.

        LLMs the workspace holds override the `snapshot` (the artifact's fit-time pool); LLMs
        only in the snapshot stay (an artifact copied into a workspace still routes). With a
        `fit_id` (the artifact's), the workspace's rows are used only if they were written for
        that fit: after a fit interrupted between saving the artifact and writing the pool,
        the rows belong to the previous networks, so the snapshot is used, and written back
        before the first change.
        """
        pool = cls([], np.zeros((0, 0), np.float32), [], store=store, artifact=artifact)
        pool._fit_id = fit_id
        pool._merge_stored(snapshot)
        return pool

    _fit_id: str | None = None
    _stale = False

    def _merge_stored(self, snapshot: LLMPool | None) -> None:
        assert self._store is not None and self.artifact is not None
        self._stale = False
        if (
            self._fit_id is not None
            and self._store.get_meta(_fit_key(self.artifact)) != self._fit_id
        ) and snapshot is not None:
            logger.warning(
                "workspace pool of artifact %r was not written by this artifact's fit; "
                "using the artifact's own embeddings",
                self.artifact,
            )
            self._set(snapshot.llm_ids, snapshot.embeddings, snapshot.evidence_counts)
            self.evidence_means = dict(snapshot.evidence_means)
            self._stale = True
            return
        ids, vectors, counts = self._store.embeddings(self.artifact)
        stored_means = self._store.evidence_means(self.artifact)
        if snapshot is None or len(snapshot) == 0:
            if ids:
                self._set(ids, vectors, counts)
                self.evidence_means = {k: v for k, v in stored_means.items() if k in ids}
            return
        stored = {llm: i for i, llm in enumerate(ids)}
        if ids and vectors.shape[1] != snapshot.dim:
            raise LocusInputError(
                f"workspace embeddings of artifact {self.artifact!r} are {vectors.shape[1]}-d but "
                f"the artifact's are {snapshot.dim}-d; re-run locus fit"
            )
        merged_ids = list(snapshot.llm_ids) + [llm for llm in ids if llm not in snapshot]
        merged = np.zeros((len(merged_ids), snapshot.dim), dtype=np.float32)
        merged_counts = np.zeros(len(merged_ids), dtype=np.int64)
        means: dict[str, tuple[float, int]] = {}
        for row, llm in enumerate(merged_ids):
            if llm in stored:
                merged[row], merged_counts[row] = vectors[stored[llm]], counts[stored[llm]]
                found = stored_means.get(llm)
            else:
                merged[row] = snapshot.embeddings[snapshot.index(llm)]
                merged_counts[row] = snapshot.evidence_counts[snapshot.index(llm)]
                found = snapshot.evidence_means.get(llm)
            if found is not None:
                means[llm] = found
        self._set(merged_ids, merged, merged_counts)
        self.evidence_means = means

    def refresh(self, snapshot: LLMPool | None = None) -> None:
        """Re-read a bound pool from its workspace (changes made by other processes)."""
        if self._store is not None:
            self._merge_stored(snapshot)

    @property
    def bound(self) -> bool:
        """True when changes are written to a workspace."""
        return self._store is not None

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1]) if self.embeddings.ndim == 2 else 0

    def __len__(self) -> int:
        return len(self.llm_ids)

    def __contains__(self, llm_id: object) -> bool:
        return llm_id in self._index

    def index(self, llm_id: str) -> int:
        try:
            return self._index[llm_id]
        except KeyError:
            shown = ", ".join(self.llm_ids[:5]) + (", ..." if len(self.llm_ids) > 5 else "")
            raise LocusNotFoundError(
                f"LLM {llm_id!r} has no embedding{did_you_mean(llm_id, self.llm_ids)}; expected "
                f"one of {shown or 'none'}; onboard it first (locus embed)"
            ) from None

    def vectors(self, llm_ids: Sequence[str] | None = None) -> NDArray[np.float32]:
        """Embeddings (k, d) of `llm_ids` (default: every LLM, in pool order)."""
        if llm_ids is None:
            return self.embeddings
        return self.embeddings[[self.index(llm) for llm in llm_ids]]

    def upsert(
        self,
        llm_id: str,
        vector: ArrayLike,
        evidence_count: int,
        evidence_mean: float | None = None,
    ) -> NDArray[np.float32] | None:
        """Add or replace one LLM's embedding (d,); returns its previous embedding, if any.

        `evidence_mean`: the LLM's mean score on that evidence (None: unknown; an old one is
        dropped). Other LLMs do not move. A bound pool writes the change to its workspace
        first, so a failed write leaves memory and store as they were.
        """
        array = np.asarray(vector, dtype=np.float32).reshape(-1)
        if len(self) and array.shape != (self.dim,):
            raise LocusInputError(f"embedding must be ({self.dim},); found {array.shape}")
        if self._stale:
            self._write_whole()
        if self._store is not None and self.artifact is not None:
            self._store.replace_embeddings(
                self.artifact,
                [llm_id],
                array[None, :],
                [int(evidence_count)],
                only=True,
                register=True,
                evidence_means=[evidence_mean],
            )
        if evidence_mean is None:
            self.evidence_means.pop(llm_id, None)
        else:
            self.evidence_means[llm_id] = (float(evidence_mean), int(evidence_count))
        if llm_id in self._index:
            row = self._index[llm_id]
            previous = self.embeddings[row].copy()
            self.embeddings[row] = array
            self.evidence_counts[row] = int(evidence_count)
            return previous
        self._set(
            [*self.llm_ids, llm_id],
            np.vstack([self.embeddings, array[None, :]]) if len(self) else array[None, :],
            [*self.evidence_counts.tolist(), int(evidence_count)],
        )
        return None

    def replace_all(
        self,
        llm_ids: Sequence[str],
        embeddings: ArrayLike,
        evidence_counts: Sequence[int] | NDArray[np.integer],
        evidence_means: Mapping[str, tuple[float, int]] | None = None,
    ) -> None:
        """Make the pool exactly these LLMs (after a fit); a bound pool writes them whole.
        `evidence_means` as in the constructor (None: keep those of LLMs that stay)."""
        previous = (self.llm_ids, self.embeddings, self.evidence_counts)
        previous_means = self.evidence_means
        self._set(llm_ids, embeddings, evidence_counts)
        kept = previous_means if evidence_means is None else evidence_means
        self.evidence_means = {k: v for k, v in kept.items() if k in self._index}
        try:
            self._write_whole()
        except Exception:
            self._set(*previous)
            self.evidence_means = previous_means
            raise

    def _write_whole(self) -> None:
        if self._store is None or self.artifact is None:
            return
        means = [self.evidence_means.get(llm, (None, 0))[0] for llm in self.llm_ids]
        self._store.replace_embeddings(
            self.artifact, self.llm_ids, self.embeddings, self.evidence_counts,
            evidence_means=means,
        )  # fmt: skip
        if self._fit_id is not None:
            self._store.set_meta(_fit_key(self.artifact), self._fit_id)
        self._stale = False

    def bind(self, store: Store, artifact: str, *, fit_id: str | None = None) -> None:
        """Bind this pool to a workspace and write it there whole, marked as `fit_id`'s."""
        self._store, self.artifact, self._fit_id = store, artifact, fit_id
        self.replace_all(self.llm_ids, self.embeddings, self.evidence_counts)


def artifact_pools(
    llm_ids: Sequence[str],
    llm_embeddings: ArrayLike,
    evidence_counts: Sequence[int] | NDArray[np.integer],
    manifest: Manifest,
    store: Store | None = None,
    artifact: str | None = None,
) -> tuple[LLMPool, LLMPool]:
    """(an artifact's fit-time pool, the pool to route with) from what the artifact keeps: its
    LLMs, their embeddings and evidence counts, and its manifest (the fit-time evidence means,
    the `fit_id`). The pool to route with is the workspace's for `artifact` (`from_store`) when
    `store` is given, else the fit-time pool itself."""
    snapshot = LLMPool(
        llm_ids, llm_embeddings, evidence_counts, evidence_means=manifest.evidence_means
    )
    if store is None or artifact is None:
        return snapshot, snapshot
    live = LLMPool.from_store(store, artifact, snapshot, fit_id=manifest.fit_id)
    return snapshot, live


def open_artifact_workspace(
    folder: Path, workspace: Store | str | os.PathLike[str] | Literal["auto"] | None
) -> tuple[Store | None, Store | None]:
    """(the workspace whose pool an artifact `folder` reads, the same store where this call
    opened it, for its caller to close). `workspace`: a `Store` (used as it is), a workspace
    path, None (no workspace: the fit-time pool), or "auto": the workspace the folder sits in
    (`<workspace>/artifacts/<name>/`), if any."""
    from locus.store import Store
    from locus.store._core import DB_NAME

    if workspace is None:
        return None, None
    if isinstance(workspace, Store):
        return workspace, None
    if workspace == "auto":
        root = folder.resolve().parent.parent
        if folder.resolve().parent.name != "artifacts" or not (root / DB_NAME).is_file():
            return None, None
        workspace = root
    store = Store.open(workspace, create=False)
    return store, store


def workspace_pools(
    folder: Path,
    workspace: Store | str | os.PathLike[str] | Literal["auto"] | None,
    fit_time: tuple[Sequence[str], ArrayLike, Sequence[int] | NDArray[np.integer]],
    manifest: Manifest,
    trained_with: str,
) -> tuple[LLMPool | None, LLMPool, Store | None]:
    """(the fit-time snapshot where a workspace is bound, else None; the pool to route with;
    the store this call opened, for its caller to close) of the artifact `folder`, whose
    fit-time pool is `fit_time` (llm_ids, embeddings, evidence counts): the workspace's pool
    (`open_artifact_workspace`, `artifact_pools`) where there is one.

    Raises:
        LocusArtifactError: an artifact trained with another text encoder than the
            workspace's (a store this call opened is closed first).
    """
    store, owned = open_artifact_workspace(folder, workspace)
    if store is not None:
        try:
            check_same_encoder(folder.name, trained_with, store.text_encoder)
        except Exception:
            if owned is not None:
                owned.close()
            raise
    snapshot, live = artifact_pools(*fit_time, manifest, store, folder.name)
    return (None if store is None else snapshot), live, owned


def _fit_key(artifact: str) -> str:
    """Meta key naming the fit whose networks the workspace's pool of `artifact` belongs to."""
    return f"pool_fit_id:{artifact}"
