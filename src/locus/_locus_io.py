"""How a `Locus` becomes an artifact folder and back, with the workspace pool it sits in.

`Locus.save` and `Locus.load` are the entry points; the artifact format itself is
`locus.artifact`. A Locus loaded from `<workspace>/artifacts/<name>/` reads the workspace's
live pool (every LLM onboarded since the fit); loaded from anywhere else, the fit-time pool.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from locus.artifact import Artifact, load_artifact, save_artifact
from locus.errors import LocusArtifactError
from locus.inference import check_same_encoder
from locus.pool import artifact_pools

if TYPE_CHECKING:
    from locus.locus import Locus
    from locus.store import Store

__all__ = ["load_into", "save_locus"]


def save_locus(model: Locus, path: str | Path, *, also: Callable[[Path], None] | None) -> Path:
    """Write a fitted `model`'s artifact folder (`locus.artifact.save_artifact`)."""
    return save_artifact(
        Artifact(
            encoder=model.encoder_,
            predictor=model.predictor_,
            training=model.config,
            text_encoder_name=model.text_encoder_name_,
            query_dim=model.query_dim_,
            evidence_bound=model.evidence_bound_,
            llm_ids=model.llm_ids_,
            llm_embeddings=model.llm_embeddings_,
            evidence_counts=model.evidence_counts_,
            anchors=model.anchors_,
            history=model.history_,
            best_step=model.best_step_,
            metadata=model.metadata,
            reference_queries=model.reference_queries_,
        ),
        path,
        also=also,
    )


def load_into(
    model: Locus,
    folder: Path,
    *,
    device: str,
    workspace: Store | str | os.PathLike[str] | Literal["auto"] | None,
) -> None:
    """Fill a fresh `model` from the artifact `folder`, its pool the workspace's where there is
    one (see `Locus.load`).

    Raises:
        LocusArtifactError: a damaged or foreign artifact, or one trained on another text
            encoder than the workspace's.
    """
    artifact = load_artifact(folder, device=device)
    model.config = artifact.training
    model.encoder_ = artifact.encoder
    model.predictor_ = artifact.predictor
    model.anchors_ = artifact.anchors
    model.history_ = artifact.history
    model.best_step_ = artifact.best_step
    model.query_dim_ = artifact.query_dim
    model.text_encoder_name_ = artifact.text_encoder_name
    model.evidence_bound_ = artifact.evidence_bound
    model.metadata = artifact.metadata
    model.reference_queries_ = artifact.reference_queries
    store = _open_workspace(model, folder, workspace)
    if store is not None:
        try:
            check_same_encoder(folder.name, artifact.text_encoder_name, store.text_encoder)
        except LocusArtifactError:
            model.close()
            raise
    snapshot, model.pool_ = artifact_pools(
        artifact.llm_ids,
        artifact.llm_embeddings,
        artifact.evidence_counts,
        artifact.metadata,
        store,
        folder.name,
    )
    model._snapshot = None if store is None else snapshot


def _open_workspace(
    model: Locus,
    folder: Path,
    workspace: Store | str | os.PathLike[str] | Literal["auto"] | None,
) -> Store | None:
    """The store `workspace` names for the artifact `folder`; one the model opens itself is
    kept as its `_owned_store`, closed by `Locus.close`."""
    from locus.store import Store
    from locus.store._core import DB_NAME

    if workspace is None:
        return None
    if isinstance(workspace, Store):
        return workspace
    if workspace == "auto":
        root = folder.resolve().parent.parent
        if folder.resolve().parent.name != "artifacts" or not (root / DB_NAME).is_file():
            return None
        workspace = root
    model._owned_store = Store.open(workspace, create=False)
    return model._owned_store
