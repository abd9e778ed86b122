"""Every router by name: build a baseline by its kind, load any saved router folder.

>>> sorted(BASELINE_ROUTERS)
['best-single', 'cluster', 'irt', 'knn', 'mf', 'oracle', 'per-task', 'random']
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from locus.artifact.layout import CONFIG_FILE, ROUTER_FILE
from locus.errors import LocusArtifactError, LocusInputError
from locus.routing import router_artifact
from locus.routing.baselines import (
    BaselineRouter,
    BestSingleRouter,
    OracleRouter,
    PerTaskRouter,
    RandomRouter,
)
from locus.routing.cluster import ClusterRouter
from locus.routing.learned import IRTRouter, MFRouter
from locus.routing.neighbours import KNNRouter
from locus.routing.router import Router

__all__ = ["BASELINE_ROUTERS", "load_router", "make_baseline"]

BASELINE_ROUTERS: dict[str, type[BaselineRouter]] = {
    cls.kind: cls
    for cls in (
        RandomRouter,
        BestSingleRouter,
        PerTaskRouter,
        OracleRouter,
        KNNRouter,
        ClusterRouter,
        MFRouter,
        IRTRouter,
    )
}


def make_baseline(kind: str, **settings: Any) -> BaselineRouter:
    """An unfitted baseline router of `kind` (one of `BASELINE_ROUTERS`) with its settings."""
    try:
        cls = BASELINE_ROUTERS[kind]
    except KeyError:
        raise LocusInputError(
            f"unknown router {kind!r}; expected one of {', '.join(sorted(BASELINE_ROUTERS))}"
        ) from None
    return cls(**settings)


def load_router(path: str | Path) -> Router:
    """A saved router folder: a baseline (`router.json`) or a LOCUS artifact (`config.json`:
    the `StackedRouter` it holds, with its stack and guard where the fit kept them, read by
    `locus.routing.router_artifact.load`)."""
    folder = Path(path)
    if (folder / ROUTER_FILE).exists():
        try:
            kind = json.loads((folder / ROUTER_FILE).read_text()).get("kind")
        except json.JSONDecodeError as error:
            raise LocusArtifactError(f"{folder / ROUTER_FILE}: not valid JSON ({error})") from None
        if kind not in BASELINE_ROUTERS:
            raise LocusArtifactError(f"{folder}: unknown router kind {kind!r}")
        return BASELINE_ROUTERS[kind].load(folder)
    if (folder / CONFIG_FILE).exists():
        return router_artifact.load(folder).router
    raise LocusArtifactError(
        f"{folder}: not a saved router: no {ROUTER_FILE} (a baseline) or {CONFIG_FILE} (a LOCUS "
        "artifact)"
    )
