"""One colour per routing method and per LLM family, for every page and plot.

The suite plots (`locus.benchmark.report`, `locus.routing.frontier`), the atlas's pictures
(`locus.atlas.plots`) and its HTML page all take their colours from here, so kNN is the same
green in the anchors plot, the cost frontier and the onboarding plot, and a Llama is the same
colour on the map, in its PNG and in the list beside it. Plain Python (no numpy, nothing else
from locus), so any layer may import it.

    >>> method_colour("knn") == method_colour("kNN") == method_colour("knn@anchors")
    True
    >>> method_colour("locus+knn (default)") == method_colour("LOCUS router (both rules)")
    True
    >>> family_colour("Llama") == family_colour("llama")
    True
    >>> colours = legend_colours(["qwen", "llama", "llama", None], kind="family")
    >>> list(colours)                       # the largest group first, "unknown" last
    ['llama', 'qwen', 'unknown']
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterable

__all__ = [
    "CATEGORICAL",
    "METHOD_COLOURS",
    "OTHER",
    "UNKNOWN",
    "category_colour",
    "cluster_colour",
    "family_colour",
    "legend_colours",
    "method_colour",
    "method_key",
]

# Well separated categorical colours (Tableau 10, then lighter and darker companions), in the
# order clusters and unnamed categories take them.
CATEGORICAL = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#17becf", "#8cd17d", "#d37295", "#a0cbe8", "#b6992d", "#499894", "#fabfd2",
    "#86bcb6", "#f1ce63", "#d4a6c8", "#ffbe7d",
)  # fmt: skip
UNKNOWN = "#d0d5dd"  # no value (an LLM without a family)
OTHER = "#98a2b3"  # the groups a legend of at most `limit` entries leaves out

# Every routing method of the suites, the atlas's portfolio methods and the reference lines.
METHOD_COLOURS = {
    "locus": "#2563eb",
    "locus+knn": "#7c3aed",  # the router `locus fit` keeps
    "knn": "#16a34a",
    "cluster": "#0891b2",
    "mf": "#ea580c",
    "irt": "#db2777",
    "per-task": "#a16207",
    "best-single": "#475569",
    "static-mix": "#94a3b8",
    "oracle": "#111827",
    "random": "#9ca3af",
    "k-center": "#0d9488",
    "k-medoids": "#c026d3",
    "full-pool": "#334155",
}
_METHOD_ALIASES = {
    "router": "locus+knn",
    "locus-router": "locus+knn",
    "stacked": "locus+knn",
    "locus-knn": "locus+knn",
    "best-single-llm": "best-single",
    "best-llm": "best-single",
    "single-llms": "best-single",
    "best-llm-per-task": "per-task",
    "static-mix-of-single-llms": "static-mix",
    "best-static-mix-of-single-llms": "static-mix",
    "static": "static-mix",
    "random-llm": "random",
    "matrix-factorisation": "mf",
    "matrix-factorization": "mf",
    "k-nn": "knn",
    "kcenter": "k-center",
    "kmedoids": "k-medoids",
}

# Families with a colour of their own (catalog names, and what `locus.data.families` guesses
# from LLM names); any other family takes one from CATEGORICAL by a hash of its name.
_FAMILY_COLOURS = {
    "llama": "#4e79a7",
    "mistral": "#f28e2b",
    "mixtral": "#ffbe7d",
    "qwen": "#59a14f",
    "gemini": "#e15759",
    "gemma": "#ff9da7",
    "gpt": "#76b7b2",
    "o1": "#499894",
    "o3": "#86bcb6",
    "claude": "#9c755f",
    "deepseek": "#b07aa1",
    "yi": "#edc948",
    "phi": "#17becf",
    "command": "#d37295",
    "jamba": "#b6992d",
    "grok": "#8cd17d",
    "glm": "#a0cbe8",
    "internlm": "#f1ce63",
    "falcon": "#d4a6c8",
    "olmo": "#fabfd2",
    "nemotron": "#8cd17d",
    "granite": "#a0cbe8",
}


def method_key(name: str) -> str:
    """The canonical name of a method as plots label it: lower case, words joined by "-",
    without a parenthesised remark ("(default)") or an onboarding strategy ("@anchors").

    >>> method_key("LOCUS router (both rules)"), method_key("knn@random"), method_key("Best single")
    ('locus+knn', 'knn', 'best-single')
    """
    key = re.sub(r"\([^)]*\)", " ", name.lower()).split("@", 1)[0]
    key = "-".join(re.findall(r"[a-z0-9+.]+", key))
    key = key.replace("-+-", "+").replace("+-", "+").replace("-+", "+")
    return _METHOD_ALIASES.get(key, key)


def method_colour(name: str) -> str:
    """The colour of a routing method ("knn", "locus+knn (default)", "best-single", ...); a
    method not known here gets a colour from its name's hash, the same every time."""
    key = method_key(name)
    return METHOD_COLOURS.get(key) or _hashed(key)


def family_colour(name: str) -> str:
    """The colour of an LLM family (case and spaces ignored): fixed for the common families,
    else chosen by a hash of the name (the same in every run and on every page)."""
    key = _family_key(name)
    return _FAMILY_COLOURS.get(key) or _hashed(key)


def cluster_colour(index: int) -> str:
    """The colour of cluster `index` (clusters are numbered 0.. on every page alike)."""
    return CATEGORICAL[int(index) % len(CATEGORICAL)]


def category_colour(kind: str, value: str | int) -> str:
    """The colour of one category of a colouring: `kind` "family", "cluster" (value: its
    index) or anything else (a colour by the value's hash)."""
    if kind == "cluster":
        return cluster_colour(int(value))
    if kind == "family":
        return family_colour(str(value))
    return _hashed(str(value))


def legend_colours(
    values: Iterable[str | int | float | bool | None], *, kind: str, limit: int = 12
) -> dict[str, str]:
    """{category: colour} for a legend of at most `limit` entries, in legend order.

    Categories are the values as strings; clusters in numeric order, any other kind the
    largest group first (ties by name). Where there are more than fit, the largest keep their
    colour and the rest share `OTHER` under the entry "other"; `None` (and "") are "unknown",
    last, in `UNKNOWN`. Two categories that would share a colour on one legend are told apart:
    the later one (in legend order) takes the next free colour of CATEGORICAL.
    """
    items = [None if v is None or v == "" else v for v in values]
    counts = Counter(_category(v) for v in items if v is not None)
    if kind == "cluster":
        order = sorted(counts, key=lambda c: (_number(c), c))
    else:
        order = sorted(counts, key=lambda c: (-counts[c], _natural(c)))
    unknown = any(v is None for v in items)
    room = max(1, limit - int(unknown))
    kept = order if len(order) <= room else order[: room - 1]
    colours: dict[str, str] = {}
    taken: set[str] = {UNKNOWN, OTHER}
    for category in kept:
        colour = category_colour(kind, category)
        if colour in taken:
            colour = _free(colour, taken)
        colours[category] = colour
        taken.add(colour)
    if len(kept) < len(order):
        colours["other"] = OTHER
    if unknown:
        colours["unknown"] = UNKNOWN
    return colours


def _category(value: str | int | float | bool) -> str:
    """A value as the page names its category (JSON's spelling of true and 2.0)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("inf")


def _natural(text: str) -> list[tuple[int, int | str]]:
    """Sort key: numbers inside names in numeric order, letters case-insensitively."""
    return [
        (0, int(part)) if part.isdigit() else (1, part.lower())
        for part in re.split(r"(\d+)", text)
        if part
    ]


def _family_key(name: str) -> str:
    return " ".join(str(name).lower().split())


def _hashed(key: str) -> str:
    """A colour of CATEGORICAL chosen by a stable hash of `key` (crc32: Python's own `hash` of
    a string changes from run to run)."""
    return CATEGORICAL[zlib.crc32(key.encode("utf-8")) % len(CATEGORICAL)]


def _free(colour: str, taken: set[str]) -> str:
    """The first colour of CATEGORICAL after `colour` that no category has taken yet."""
    start = CATEGORICAL.index(colour) if colour in CATEGORICAL else 0
    for step in range(1, len(CATEGORICAL) + 1):
        candidate = CATEGORICAL[(start + step) % len(CATEGORICAL)]
        if candidate not in taken:
            return candidate
    return colour
