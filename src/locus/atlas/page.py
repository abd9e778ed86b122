"""What the atlas page shows, built from a `WorkspaceAtlas`: the payload of `atlas_html`.

>>> payload = atlas_payload(atlas)                                   # doctest: +SKIP
>>> sorted(payload)[:3]  # doctest: +SKIP
['colour_by', 'colour_notes', 'colours']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from locus.atlas.html import MAX_LEGEND, colour_kind
from locus.atlas.pool_atlas import WorkspaceAtlas
from locus.atlas.projection import neighbour_k, neighbours_kept, project
from locus.palette import legend_colours

__all__ = ["GUESSED_FAMILY", "Colourings", "atlas_payload", "colourings"]

PROJECTION_NAMES = {"tsne": "t-SNE", "pca": "PCA"}
GUESSED_FAMILY = "family (guessed from name)"


@dataclass(frozen=True)
class Colourings:
    """The ways the map can be coloured, the default first.

    Attributes:
        fields: colour_by field names, the default first ("family": the LLM catalog's;
            GUESSED_FAMILY: from the names, where the catalog lacks some; "cluster").
        values: {field: (n_llms,) category per LLM, None where unknown}.
        notes: {field: what the colouring is, and why the default is the default}.
    """

    fields: list[str]
    values: dict[str, list[str | int | None]]
    notes: dict[str, str]

    @property
    def default(self) -> str:
        return self.fields[0]

    def colours(self, field: str) -> dict[str, str]:
        """{category: colour} of one colouring's legend (`locus.palette`)."""
        return legend_colours(self.values[field], kind=colour_kind(field), limit=MAX_LEGEND)


def colourings(atlas: WorkspaceAtlas, clusters: Sequence[int]) -> Colourings:
    """Families from the LLM catalog when it gives them, the names' guess only as a labelled
    second choice; the default is the catalog's families when they cover most of the pool and
    fit a legend of MAX_LEGEND entries, else the clusters of the embeddings (and the notes
    say why)."""
    catalog = atlas.catalog_families
    known = [family for family in catalog if family]
    distinct = len(set(known))
    n = len(atlas.llm_ids)
    k = len(set(clusters))
    values: dict[str, list[str | int | None]] = {"cluster": [int(c) for c in clusters]}
    notes = {"cluster": f"{k} clusters of the LLM embeddings (average linkage)"}
    fields = []
    if known:
        values["family"] = list(catalog)
        note = f"from the LLM catalog: {distinct} famil{'y' if distinct == 1 else 'ies'}"
        if len(known) < n:
            note += f", unknown for {n - len(known)} of {n} LLMs"
        if distinct > MAX_LEGEND:
            note += f"; the {MAX_LEGEND - 1} largest have a colour, the rest are 'other'"
        notes["family"] = note
        fields.append("family")
    if len(known) < n:
        guessed = atlas.guessed_families
        values[GUESSED_FAMILY] = list(guessed)
        count = len(set(guessed))
        notes[GUESSED_FAMILY] = (
            f"a guess from each LLM's name ({count} families"
            + (f"; the {MAX_LEGEND - 1} largest have a colour" if count > MAX_LEGEND else "")
            + "), not the LLM catalog: `locus import llms` with a family column gives the "
            "real ones"
        )
        fields.append(GUESSED_FAMILY)
    if known and distinct <= MAX_LEGEND and 2 * len(known) >= n:
        return Colourings(["family", "cluster", *fields[1:]], values, notes)
    if not known:
        why = "the LLM catalog gives no families (`locus import llms` with a family column)"
    elif distinct > MAX_LEGEND:
        why = f"the catalog's {distinct} families are too many to tell apart by colour"
    else:
        why = f"the LLM catalog gives families for only {len(known)} of {n} LLMs"
    notes["cluster"] += f"; shown because {why}"
    return Colourings(["cluster", *fields], values, notes)


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
    its colourings (`colourings`: catalog family, the names' guess, cluster), accuracy,
    metadata, nearest neighbours and proxies, each colouring's legend, and the k-center /
    k-medoids portfolios for k = 1..max_portfolio."""
    clusters = atlas.clusters().labels
    colouring = colourings(atlas, clusters.tolist())
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
        metadata = {
            k: v for k, v in atlas.metadata[i].items() if k not in ("display_name", "family")
        }
        llms.append(
            {
                "llm_id": llm,
                "display_name": atlas.metadata[i].get("display_name"),
                **{field: colouring.values[field][i] for field in colouring.fields},
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
        "colour_by": colouring.fields,
        "colours": {field: colouring.colours(field) for field in colouring.fields},
        "colour_notes": colouring.notes,
        "llms": llms,
        "portfolios": portfolios,
    }
