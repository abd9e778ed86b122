"""What the atlas page shows, built from a `WorkspaceAtlas`: the payload of `atlas_html`.

>>> payload = atlas_payload(atlas)                                   # doctest: +SKIP
>>> sorted(payload)[:3]
['colour_by', 'llms', 'portfolios']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from locus.atlas.pool_atlas import WorkspaceAtlas
from locus.atlas.projection import neighbour_k, neighbours_kept, project

__all__ = ["atlas_payload"]

PROJECTION_NAMES = {"tsne": "t-SNE", "pca": "PCA"}


def atlas_payload(
    atlas: WorkspaceAtlas,
    *,
    projections: Sequence[str] = ("tsne", "pca"),
    neighbours: int = 5,
    max_portfolio: int = 20,
    seed: int = 0,
) -> dict[str, Any]:
    """The page's data: 2-D coordinates per projection (and the share of true neighbours
    each keeps; the one that keeps the most first, which the page shows by default), per LLM
    its family, cluster, accuracy, metadata, nearest neighbours and proxies, and the k-center /
    k-medoids portfolios for k = 1..max_portfolio."""
    clusters = atlas.clusters().labels
    coords, kept = {}, {}
    for method in projections:
        xy = project(atlas.embeddings, method, seed=seed)
        name = PROJECTION_NAMES.get(method, method)
        coords[name] = {
            llm: [float(x), float(y)] for llm, (x, y) in zip(atlas.llm_ids, xy, strict=True)
        }
        kept[name] = neighbours_kept(atlas.embeddings, xy, k=10)
    # the default view is the projection that keeps the most true neighbours on this pool
    best = sorted(coords, key=lambda name: -np.nan_to_num(kept[name], nan=-1.0))
    coords = {name: coords[name] for name in best}
    llms = []
    for i, llm in enumerate(atlas.llm_ids):
        near = [
            {k: n[k] for k in ("llm_id", "distance", "agreement")}
            for n in atlas.similar(llm, neighbours)
        ]
        metadata = {k: v for k, v in atlas.metadata[i].items() if k != "display_name"}
        llms.append(
            {
                "llm_id": llm,
                "display_name": atlas.metadata[i].get("display_name"),
                "family": atlas.families[i],
                "cluster": int(clusters[i]),
                "accuracy": None if np.isnan(atlas.accuracy[i]) else float(atlas.accuracy[i]),
                "metadata": metadata,
                "neighbours": near,
                "proxies": [
                    {k: n[k] for k in ("llm_id", "distance", "agreement")}
                    for n in atlas.proxies(llm, neighbours, by="predicted")
                ],
            }
        )
    top = min(max_portfolio, len(atlas.llm_ids))
    portfolios = {
        method: {
            str(k): [atlas.llm_ids[j] for j in atlas.portfolio(k, method)]
            for k in range(1, top + 1)
        }
        for method in ("k-center", "k-medoids")
    }
    return {
        "title": f"locus atlas: {len(atlas.llm_ids)} LLMs",
        "subtitle": (
            f"artifact {atlas.artifact} · {atlas.embeddings.shape[1]}-d LLM embeddings, "
            f"{atlas.metric} distance · agreement on {len(atlas.test_scores):,} test queries · "
            f"shown: {best[0]}, the projection that keeps the most true neighbours here"
        ),
        "projections": coords,
        "projection_kept": kept,
        "projection_k": neighbour_k(len(atlas.llm_ids)),
        "colour_by": ["family", "cluster"],
        "llms": llms,
        "portfolios": portfolios,
    }
