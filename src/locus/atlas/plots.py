"""PNG pictures of the atlas (matplotlib, loaded only when a picture is asked for)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus._plotting import pyplot

__all__ = ["dendrogram_png", "map_png", "portfolio_png"]


def _save(figure: Any, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=130, bbox_inches="tight")
    pyplot().close(figure)
    return path


def dendrogram_png(
    linkage: NDArray[Any], labels: Sequence[str], path: Path, *, title: str = ""
) -> Path:
    """The hierarchical clustering as a dendrogram, one leaf per LLM, labelled by name."""
    from scipy.cluster.hierarchy import dendrogram

    plt = pyplot()
    height = max(4.0, 0.22 * len(labels) + 1.0)
    figure, axis = plt.subplots(figsize=(9, height))
    dendrogram(linkage, labels=list(labels), orientation="left", ax=axis, leaf_font_size=8)
    axis.set_xlabel("distance between merged clusters")
    axis.set_title(title or f"LLM embeddings: {len(labels)} LLMs")
    axis.spines[["top", "right"]].set_visible(False)
    return _save(figure, path)


# the atlas page's categorical colours (assets/atlas.js PALETTE), so the PNG map and the HTML
# map colour each family alike; categories in the page's order, "unknown" last and grey
PALETTE = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#9c755f",
    "#ff9da7", "#17becf", "#8cd17d", "#d37295", "#a0cbe8", "#b6992d", "#499894", "#fabfd2",
    "#86bcb6", "#79706e",
)  # fmt: skip
UNKNOWN = "#b8c0cc"


def _natural(name: str) -> list[Any]:
    """The page's order of categories (numbers within names in numeric order)."""
    import re

    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def category_colours(groups: Sequence[str | None]) -> dict[str, str]:
    """{category: colour} as the atlas page gives them: named categories in natural order
    through `PALETTE`, then "unknown" (no value) in grey."""
    named = sorted({str(g) for g in groups if g not in (None, "")}, key=_natural)
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(named)}
    if any(g in (None, "") for g in groups):
        colours["unknown"] = UNKNOWN
    return colours


def map_png(
    coords: NDArray[Any],
    labels: Sequence[str],
    groups: Sequence[str],
    sizes: NDArray[Any],
    path: Path,
    *,
    title: str = "",
) -> Path:
    """A 2-D map: one point per LLM, coloured by group, sized by accuracy, labelled."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(10, 7.5))
    palette = category_colours(groups)
    groups = ["unknown" if g in (None, "") else str(g) for g in groups]
    names = list(palette)
    sizes = np.asarray(sizes, dtype=np.float64)
    area = 30 + 300 * (sizes - np.nanmin(sizes)) / max(np.nanmax(sizes) - np.nanmin(sizes), 1e-9)
    for name in names:
        rows = [i for i, group in enumerate(groups) if group == name]
        axis.scatter(
            coords[rows, 0],
            coords[rows, 1],
            s=area[rows],
            color=palette[name],
            alpha=0.8,
            edgecolor="white",
            linewidth=0.8,
            label=name,
        )
    if len(labels) <= 80:
        for i, label in enumerate(labels):
            axis.annotate(label, coords[i], fontsize=6.5, xytext=(4, 3), textcoords="offset points")
    axis.set_xticks([])
    axis.set_yticks([])
    axis.set_title(title or "LLM embeddings (point size: accuracy)")
    if len(names) <= 20:
        axis.legend(fontsize=7, frameon=False, loc="best", markerscale=0.6)
    return _save(figure, path)


def portfolio_png(
    curves: Mapping[str, Sequence[tuple[int, float]]],
    random_curve: Sequence[tuple[int, float, float]],
    full_pool: float,
    path: Path,
    *,
    title: str = "",
) -> Path:
    """Routing hit@1 of each method's portfolio against its size, beside random portfolios
    (mean and one standard deviation) and the full pool."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(8, 5))
    for name, points in curves.items():
        ks, hits = zip(*points, strict=True)
        axis.plot(ks, hits, marker="o", markersize=3, label=name)
    if random_curve:
        sizes, means, sds = (np.array(v) for v in zip(*random_curve, strict=True))
        axis.plot(sizes, means, color="grey", linestyle="--", label="random (mean ± sd)")
        axis.fill_between(sizes, means - sds, means + sds, color="grey", alpha=0.2)
    axis.axhline(full_pool, color="black", linewidth=0.8, label="full pool")
    axis.set_xlabel("LLMs in the portfolio")
    axis.set_ylabel("routing hit@1 (test queries)")
    axis.set_title(title or "Portfolios chosen from embeddings alone")
    axis.legend(frameon=False)
    axis.spines[["top", "right"]].set_visible(False)
    return _save(figure, path)
