"""The router artifact: what `locus fit` keeps in `<workspace>/artifacts/<name>/`, written by
one `save` and read by one `load`.

    config.json, anchors.json,      LOCUS's networks and fit-time pool (the facade's files:
    weights.safetensors             `Locus.save`, `locus.artifact`; read without torch by
                                    `locus.artifact.read_for_routing`)
    stacked.json                    the stack, the guard, where the kNN part is, and how an
                                    LLM joined since the fit is read (`thin`)
    knn/                            the kNN router the stack reads (a router folder)
    factors/mf/0, factors/mf/1,     the factor models a newcomer's "factor" and "ability"
    factors/irt/0, factors/irt/1    readings onboard it in (`locus.routing.factors.Factors`:
                                    each model two router folders, one per half of the LLMs)
    costs/router.json + arrays      the per-query cost model (only where the workspace had
                                    per-query costs; a router folder)
    costs/validation.safetensors    the fit's validation query vectors, which a budget is
                                    tuned on

Each file's versions, and the one step that reads an older version as the current one, are in
`locus.artifact.formats`; the file names in `locus.artifact.layout`. `save` replaces the
folder whole, so a reader sees the old artifact or the new one, never a mix.

    >>> save("artifacts/default", router, cost_model=costs,          # doctest: +SKIP
    ...      validation_vectors=validation_vectors)
    >>> load("artifacts/default").router.route(query_vectors)[0].llm_id  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.artifact.formats import STACKED_FORMAT, upgrade_stacked
from locus.artifact.layout import (
    COST_FOLDER,
    FACTORS_FOLDER,
    KNN_FOLDER,
    ROUTER_FILE,
    STACKED_FILE,
    read_artifact_config,
    read_json,
    replaced_folder,
    write_json,
)
from locus.errors import LocusArtifactError, LocusInputError
from locus.routing.costs import CostModel
from locus.routing.guard import Guard
from locus.routing.locus_router import LocusRouter, LogitRouter
from locus.routing.neighbours import KNNRouter
from locus.routing.stack import Stack
from locus.routing.stacked import StackedRouter
from locus.routing.thin import ThinEvidence

__all__ = ["RouterArtifact", "load", "save"]


@dataclass(frozen=True)
class RouterArtifact:
    """What an artifact folder holds for routing, read once.

    Attributes:
        folder: the folder it was read from.
        router: the fitted router: LOCUS, its kNN part and stack (or none: LOCUS alone), the
            guard (or none).
        cost_model: the per-query cost model; None where the workspace had no per-query costs.
        validation_vectors: (n_val, dq) the fit's validation query vectors, which a budget is
            tuned on; None where the fit kept none (fitted before locus kept them).
    """

    folder: Path
    router: StackedRouter
    cost_model: CostModel | None = None
    validation_vectors: NDArray[np.float32] | None = None


def save(
    path: str | Path,
    router: StackedRouter,
    *,
    cost_model: CostModel | None = None,
    validation_vectors: NDArray[np.floating[Any]] | None = None,
) -> Path:
    """Write the router artifact into the folder `path`, replacing it whole: `router`'s LOCUS
    networks, its kNN part, stack and guard, and, where given, the cost model and the
    validation query vectors (n_val, dq). `load` reads it back with identical predictions.

    Raises:
        LocusInputError: a router whose LOCUS part cannot write its networks (a
            `NumpyLocusRouter` reads them; `locus fit` writes them).
    """
    locus = router.locus
    if not isinstance(locus, LocusRouter):
        raise LocusInputError(
            f"a stacked router over a {type(locus).__name__} cannot save its LOCUS part; save "
            "the fitted Locus's router (locus fit does)"
        )
    with replaced_folder(path) as staging:
        locus.model.save(staging)  # the networks' files (the facade replaces `staging` whole)
        if router.knn is not None:
            router.knn.save(staging / KNN_FOLDER)
        if router.factors is not None:
            router.factors.save(staging / FACTORS_FOLDER)
        parts = {
            "format": STACKED_FORMAT,
            "stack": None if router.stack is None else router.stack.as_dict(),
            "guard": None if router.guard is None else router.guard.as_dict(),
            "knn": None if router.knn is None else KNN_FOLDER,
            "thin": None if router.thin is None else router.thin.as_dict(),
            "factors": None if router.factors is None else FACTORS_FOLDER,
        }
        write_json(staging / STACKED_FILE, parts)
        if cost_model is not None:
            cost_model.save(staging / COST_FOLDER)
        if validation_vectors is not None:
            (staging / COST_FOLDER).mkdir(exist_ok=True)
            CostModel.save_validation(staging / COST_FOLDER, validation_vectors)
    return Path(path)


def load(path: str | Path, locus: LogitRouter | None = None) -> RouterArtifact:
    """Read the router artifact in the folder `path`, of any readable version
    (`locus.artifact.formats`). `locus`: its LOCUS part already read (the workspace router
    passes a `NumpyLocusRouter` over its live pool), else the folder's `Locus` (torch) with
    its workspace's pool.

    Raises:
        LocusArtifactError: a missing, damaged, foreign or newer file, or an artifact of an
            earlier version that mixed probabilities (re-run `locus fit`).
    """
    folder = Path(path)
    config = read_artifact_config(folder)
    parts_file = folder / STACKED_FILE
    found = read_json(parts_file) if parts_file.exists() else None
    where = parts_file if found is not None else folder
    parts = upgrade_stacked(found, config["metadata"], where)
    knn = None
    if parts["knn"]:
        loaded = KNNRouter.load(folder / str(parts["knn"]))
        if not isinstance(loaded, KNNRouter):  # KNNRouter.load refuses another kind
            raise LocusArtifactError(f"{folder}: the stack's kNN part is not a kNN router")
        knn = loaded
    factors = None
    if parts["factors"]:
        from locus.routing.factors import Factors

        factors = Factors.load(folder / str(parts["factors"]))
    if locus is None:
        locus = LocusRouter.load(folder)
    try:
        stack = None if not parts["stack"] else Stack.from_dict(parts["stack"])
        guard = None if not parts["guard"] else Guard.from_dict(parts["guard"])
        thin = None if not parts["thin"] else ThinEvidence.from_dict(parts["thin"])
        router = StackedRouter(locus, knn, stack, guard, thin=thin, factors=factors)
    except (KeyError, TypeError, ValueError, LocusInputError) as error:
        raise LocusArtifactError(
            f"{where}: a damaged stack or guard ({error}); re-run locus fit"
        ) from error
    costs = folder / COST_FOLDER
    return RouterArtifact(
        folder=folder,
        router=router,
        cost_model=CostModel.load(costs) if (costs / ROUTER_FILE).exists() else None,
        validation_vectors=CostModel.validation_vectors(costs),
    )
