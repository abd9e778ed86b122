"""PNG pictures of the atlas (matplotlib, loaded only when a picture is asked for)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus._plotting import pyplot
from locus.palette import OTHER, UNKNOWN, legend_colours, method_colour

__all__ = [
    "dendrogram_png",
    "llm_numbers",
    "map_figure",
    "map_png",
    "page_map_png",
    "portfolio_curves_png",
    "portfolio_png",
]


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


def llm_numbers(names: Sequence[str], llm_ids: Sequence[str] | None = None) -> list[int]:
    """Each LLM's number on the map: its place (from 1) in the list beside it, names in
    natural order (numbers within names numerically, case ignored), ties by llm_id. The page's
    script (assets/atlas.js, `naturalCompare`) orders its list alike."""
    ids = list(llm_ids) if llm_ids is not None else list(names)
    order = sorted(range(len(names)), key=lambda i: (_natural(names[i]), _natural(ids[i])))
    numbers = [0] * len(names)
    for place, i in enumerate(order):
        numbers[i] = place + 1
    return numbers


def _natural(name: str) -> list[tuple[int, int | str]]:
    """Sort key: runs of ASCII digits as numbers, the rest case-insensitively (what the page's
    `naturalKey` computes)."""
    return [
        (0, int(part)) if part.isdigit() else (1, part.lower())
        for part in re.split(r"([0-9]+)", name)
        if part
    ]


# Pools up to this size get a number where a name does not fit (the HTML page's MAX_NUMBERED)
MAX_NUMBERED = 100
_LABEL_POINTS = 6.5  # font size of the names on the PNG map
# where a label may sit beside its point: right, left, above, below, then the corners
_OFFSETS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1))


def map_figure(
    coords: NDArray[Any],
    names: Sequence[str],
    groups: Sequence[str | int | None],
    sizes: NDArray[Any],
    *,
    colours: Mapping[str, str] | None = None,
    llm_ids: Sequence[str] | None = None,
    title: str = "",
    colour_title: str = "",
) -> Any:
    """The map as a matplotlib figure: one point per LLM, coloured by its group through
    `colours` ({category: colour}, the page's legend; groups it leaves out are "other", None
    is "unknown"), sized by accuracy; each name beside its point where it fits without
    covering another label or point, else (pools of at most MAX_NUMBERED) its number, keyed
    to its name at the side. The map's axes are `figure.axes[0]`, its labels their texts."""
    plt = pyplot()
    coords = np.asarray(coords, dtype=np.float64)  # (n_llms, 2)
    n = len(names)
    categories = [_category(g, colours) for g in groups]
    legend = dict(colours) if colours is not None else legend_colours(groups, kind="category")
    for fallback, colour in (("other", OTHER), ("unknown", UNKNOWN)):
        if fallback in categories and fallback not in legend:
            legend[fallback] = colour
    figure = plt.figure(figsize=(12.5, 8.0))
    axis = figure.add_axes((0.03, 0.05, 0.70, 0.88))
    key_axis = figure.add_axes((0.75, 0.05, 0.24, 0.88))
    key_axis.set_axis_off()
    sizes = np.asarray(sizes, dtype=np.float64)  # (n_llms,) accuracy, NaN unknown
    finite = sizes[np.isfinite(sizes)]
    low = float(finite.min()) if len(finite) else 0.0
    spread = max(float(finite.max()) - low, 1e-9) if len(finite) else 1.0
    area = 24 + 220 * (np.nan_to_num(sizes, nan=low) - low) / spread
    area *= min(1.0, float(np.sqrt(40 / max(n, 1))))
    for category, colour in legend.items():
        rows = [i for i, c in enumerate(categories) if c == category]
        if rows:
            axis.scatter(coords[rows, 0], coords[rows, 1], s=area[rows], color=colour,
                         alpha=0.85, edgecolor="white", linewidth=0.8, zorder=3)  # fmt: skip
    for name in ("x", "y"):
        column = coords[:, 0 if name == "x" else 1]
        low_edge, high_edge = float(column.min()), float(column.max())
        pad = 0.06 * (high_edge - low_edge or 1.0)
        getattr(axis, f"set_{name}lim")(low_edge - pad, high_edge + pad)
    axis.set_xticks([])
    axis.set_yticks([])
    numbers = llm_numbers(names, llm_ids)
    named, numbered = _place_labels(figure, axis, coords, names, numbers, area, sizes)
    axis.set_title(title or "LLM embeddings (point size: accuracy)", fontsize=10, loc="left")
    _draw_key(key_axis, legend, categories, colour_title, names, numbers, numbered)
    axis.text(0.0, -0.035, f"{len(named)} of {n} LLMs named on the map"
              + (f", {len(numbered)} numbered (the key at right)" if numbered else "")
              + ("" if len(named) + len(numbered) == n else "; the HTML page names the rest"),
              transform=axis.transAxes, fontsize=7, color="#667085", va="top")  # fmt: skip
    return figure


def map_png(
    coords: NDArray[Any],
    names: Sequence[str],
    groups: Sequence[str | int | None],
    sizes: NDArray[Any],
    path: Path,
    *,
    colours: Mapping[str, str] | None = None,
    llm_ids: Sequence[str] | None = None,
    title: str = "",
    colour_title: str = "",
) -> Path:
    """`map_figure` written as a PNG to `path`."""
    figure = map_figure(
        coords, names, groups, sizes, colours=colours, llm_ids=llm_ids, title=title,
        colour_title=colour_title,
    )  # fmt: skip
    return _save(figure, path)


def _category(group: str | int | None, colours: Mapping[str, str] | None) -> str:
    if group is None or group == "":
        return "unknown"
    name = str(group)
    return name if colours is None or name in colours else "other"


def _place_labels(
    figure: Any,
    axis: Any,
    coords: NDArray[np.float64],
    names: Sequence[str],
    numbers: list[int],
    area: NDArray[np.float64],
    sizes: NDArray[np.float64],
) -> tuple[list[int], list[int]]:
    """Names, then numbers, beside their points, greedily, the most accurate first; a label
    is kept only where its box (measured by the renderer) clears the axes' edge, every label
    kept so far and every other point. Returns the rows named and the rows numbered."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    frame = axis.get_window_extent(renderer)
    points_to_pixels = figure.dpi / 72.0
    centres = axis.transData.transform(coords)  # (n_llms, 2) pixels
    radii = np.sqrt(area) / 2  # points: a scatter's s is its diameter squared, in points
    # a label may graze another point's edge, never cover its middle (as on the page)
    core = np.minimum(radii * 0.8, 3.0)[:, None] * points_to_pixels
    markers = np.hstack([centres - core, centres + core])  # (n_llms, 4) x0 y0 x1 y1
    placed = np.empty((0, 4))
    order = sorted(range(len(names)), key=lambda i: (-np.nan_to_num(sizes[i], nan=-1.0), i))

    def clear(box: NDArray[np.float64], others: NDArray[np.float64]) -> bool:
        return not bool(
            np.any(
                (box[0] < others[:, 2])
                & (others[:, 0] < box[2])
                & (box[1] < others[:, 3])
                & (others[:, 1] < box[3])
            )
        )

    def place(i: int, text: str, colour: str, rings: int) -> bool:
        nonlocal placed
        others = np.delete(markers, i, axis=0)
        # beside the point, then a little farther out with a leader line (points)
        for gap in (radii[i] + 1.5, radii[i] + 6.0, radii[i] + 12.0)[:rings]:
            for dx, dy in _OFFSETS:
                corner = 0.75 if dx and dy else 1.0
                leader = {"arrowstyle": "-", "color": "#b8c0cc", "lw": 0.6, "shrinkA": 0}
                label = axis.annotate(
                    text, coords[i], xytext=(dx * gap * corner, dy * gap * corner),
                    textcoords="offset points", fontsize=_LABEL_POINTS, color=colour, zorder=4,
                    ha={1: "left", -1: "right", 0: "center"}[dx],
                    va={1: "bottom", -1: "top", 0: "center"}[dy],
                    arrowprops=leader if gap > radii[i] + 2 else None,
                )  # fmt: skip
                extent = label.get_window_extent(renderer)
                box = np.array([extent.x0 - 1, extent.y0 - 1, extent.x1 + 1, extent.y1 + 1])
                inside = bool(
                    box[0] >= frame.x0
                    and box[1] >= frame.y0
                    and box[2] <= frame.x1
                    and box[3] <= frame.y1
                )
                if inside and clear(box, placed) and clear(box, others):
                    placed = np.vstack([placed, box])
                    return True
                label.remove()
        return False

    named = [i for i in order if place(i, names[i], "#344054", 2)]
    numbered: list[int] = []
    if len(names) <= MAX_NUMBERED:
        done = set(named)
        numbered = [i for i in order if i not in done and place(i, str(numbers[i]), "#667085", 3)]
    return named, numbered


def _draw_key(
    axis: Any,
    legend: Mapping[str, str],
    categories: Sequence[str],
    colour_title: str,
    names: Sequence[str],
    numbers: list[int],
    numbered: list[int],
) -> None:
    """The colour legend (the page's entries) and, under it, number -> name for the LLMs whose
    name did not fit on the map. `axis` spans 0..1 both ways, top down."""
    axis.set_xlim(0, 1)
    axis.set_ylim(0, 1)
    y = 1.0
    if colour_title:
        axis.text(0, y, colour_title, fontsize=8, color="#475467", va="top")
        y -= 0.04
    for category, colour in legend.items():
        count = categories.count(category)
        if count:
            axis.scatter([0.02], [y - 0.009], s=30, color=colour, clip_on=False)
            axis.text(0.06, y, f"{category} ({count})", fontsize=7.5, va="top")
            y -= 0.03
    if not numbered:
        return
    y -= 0.02
    axis.text(0, y, "numbered on the map", fontsize=8, color="#475467", va="top")
    y -= 0.035
    rows = sorted(numbered, key=lambda i: numbers[i])
    step = min(0.025, max(y, 0.1) / len(rows))
    for i in rows:
        axis.text(0, y, f"{numbers[i]:>3}  {names[i]}", fontsize=min(7.0, 280 * step),
                  va="top", family="monospace")  # fmt: skip
        y -= step


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
        axis.plot(ks, hits, marker="o", markersize=3, label=name, color=method_colour(name))
    if random_curve:
        sizes, means, sds = (np.array(v) for v in zip(*random_curve, strict=True))
        random = method_colour("random")
        axis.plot(sizes, means, color=random, linestyle="--", label="random (mean ± sd)")
        axis.fill_between(sizes, means - sds, means + sds, color=random, alpha=0.2)
    axis.axhline(full_pool, color=method_colour("full pool"), linewidth=0.8, label="full pool")
    axis.set_xlabel("LLMs in the portfolio")
    axis.set_ylabel("routing hit@1 (test queries)")
    axis.set_title(title or "Portfolios chosen from embeddings alone")
    axis.legend(frameon=False)
    axis.spines[["top", "right"]].set_visible(False)
    return _save(figure, path)


def page_map_png(payload: Mapping[str, Any], accuracy: Any, path: Path) -> Path:
    """The PNG of an atlas page's default view (`payload`: the page's data): its first
    projection and first colouring, with the page's colours and numbers."""
    projection, coords = next(iter(payload["projections"].items()))
    field = payload["colour_by"][0]
    llms = payload["llms"]
    ids = [llm["llm_id"] for llm in llms]
    return map_png(
        np.array([coords[llm] for llm in ids]),
        [llm.get("display_name") or llm["llm_id"] for llm in llms],
        [llm.get(field) for llm in llms],
        np.asarray(accuracy, dtype=np.float64),
        path,
        colours=payload["colours"][field],
        llm_ids=ids,
        title=f"{projection} map of {len(ids)} LLMs (the HTML page's default view; point "
        "size: accuracy)",
        colour_title=f"colour: {field}",
    )


def portfolio_curves_png(atlas: Any, path: Path, draws: int) -> Path:
    """The accuracy of the k-center and k-medoids portfolios of a `WorkspaceAtlas` for k up to
    30, beside `draws` random portfolios of each size (`portfolio_png`)."""
    from locus.atlas.portfolio import random_portfolios

    top = min(len(atlas.llm_ids), 30)
    curves = {
        method: [
            (k, atlas.portfolio_accuracy(atlas.portfolio(k, method))) for k in range(1, top + 1)
        ]
        for method in ("k-center", "k-medoids")
    }
    random_curve = [
        (k, *random_portfolios(atlas.test_proba, atlas.test_scores, k, draws=draws))
        for k in range(1, top + 1)
    ]
    return portfolio_png(curves, random_curve, atlas.full_pool_accuracy(), path)
