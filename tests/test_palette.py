"""One colour per method and per LLM family: the palette itself, and every plotting entry point
drawing a method (or a family) in the palette's colour."""

from __future__ import annotations

import ast
import doctest
import re
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pytest

import locus.palette as palette_module
from locus.palette import (
    CATEGORICAL,
    METHOD_COLOURS,
    OTHER,
    UNKNOWN,
    family_colour,
    legend_colours,
    method_colour,
    method_key,
)


def test_module_examples_run() -> None:
    result = doctest.testmod(palette_module)
    assert result.attempted > 0 and result.failed == 0


def test_the_palette_imports_neither_numpy_nor_the_rest_of_locus() -> None:
    tree = ast.parse(Path(palette_module.__file__).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "collections", "re", "zlib"}, imported


@pytest.mark.parametrize(
    ("names", "key"),
    [
        (["knn", "kNN", "knn@anchors", "knn (default)", "k-NN"], "knn"),
        (["locus+knn", "locus+knn (default)", "LOCUS router (both rules)", "router"], "locus+knn"),
        (["locus", "LOCUS", "locus@random"], "locus"),
        (["best-single", "best single LLM", "Best single"], "best-single"),
        (["per-task", "best LLM per task", "per_task"], "per-task"),
        (["static mix", "static-mix", "best static mix of single LLMs"], "static-mix"),
        (["mf", "MF", "matrix factorisation"], "mf"),
        (["random", "random (mean ± sd)", "random LLM"], "random"),
    ],
)
def test_every_spelling_of_a_method_is_one_colour(names: list[str], key: str) -> None:
    assert {method_key(name) for name in names} == {key}
    assert {method_colour(name) for name in names} == {METHOD_COLOURS[key]}


def test_methods_have_distinct_fixed_colours_and_strangers_a_stable_one() -> None:
    assert len(set(METHOD_COLOURS.values())) == len(METHOD_COLOURS)
    assert all(re.fullmatch(r"#[0-9a-f]{6}", colour) for colour in METHOD_COLOURS.values())
    assert method_colour("a method from next year") == method_colour("a method from next year")
    assert method_colour("a method from next year") in CATEGORICAL


def test_family_colours_are_fixed_by_name_whatever_the_pool() -> None:
    assert family_colour("Llama") == family_colour(" llama ") == family_colour("LLAMA")
    assert family_colour("llama") != family_colour("qwen")
    small = legend_colours(["llama", "qwen"], kind="family")
    large = legend_colours(["qwen", "mistral", "gemini", "llama", "llama"], kind="family")
    assert small["llama"] == large["llama"] == family_colour("llama")
    assert small["qwen"] == large["qwen"]


def test_a_legend_has_at_most_twelve_entries_the_largest_groups_kept() -> None:
    families = [f"family-{i}" for i in range(40) for _ in range(40 - i)] + [None]
    colours = legend_colours(families, kind="family", limit=12)
    assert len(colours) == 12
    assert list(colours)[:3] == ["family-0", "family-1", "family-2"]
    assert list(colours)[-2:] == ["other", "unknown"]
    assert colours["other"] == OTHER and colours["unknown"] == UNKNOWN
    named = [colour for category, colour in colours.items() if category not in ("other", "unknown")]
    assert len(set(named)) == len(named), "two categories of one legend share a colour"


def test_clusters_are_coloured_by_number_in_numeric_order() -> None:
    colours = legend_colours([2, 0, 10, 1, 0], kind="cluster")
    assert list(colours) == ["0", "1", "2", "10"]
    assert colours["0"] == CATEGORICAL[0] and colours["10"] == CATEGORICAL[10]


# --- every plotting entry point draws a method in its palette colour ---------------------------


def _svg_colours(path: Path) -> dict[str, set[str]]:
    """{legend label: the colours drawn with it} read back from a matplotlib SVG written with
    svg.fonttype "none" (texts as <text>): each legend entry's handle precedes its label."""
    svg = path.read_text(encoding="utf-8")
    found: dict[str, set[str]] = {}
    for start in [m.end() for m in re.finditer(r'<g id="legend_\d+">', svg)]:
        end = re.compile(r'<g id="(?:axes|legend)_\d+">').search(svg, start)
        block = svg[start : end.start() if end else len(svg)]
        colours: set[str] = set()
        for token in re.finditer(
            r"(?:stroke|fill): (#[0-9a-f]{6})|<text[^>]*>([^<]*)</text>", block
        ):
            if token.group(1):
                colours.add(token.group(1))
            elif token.group(2).strip():
                found.setdefault(token.group(2).strip(), set()).update(colours)
                colours = set()
    return found


def _colour_of(found: dict[str, set[str]], label_start: str) -> set[str]:
    hits = [colours for label, colours in found.items() if label.startswith(label_start)]
    assert hits, f"no legend entry {label_start!r} in {sorted(found)}"
    return hits[0] - {"#ffffff", "#000000", "#cccccc"}  # the legend's frame


def _sweep_result(methods: list[str], sizes: list[str]) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    summary = {
        m: {s: {k: {"mean": float(rng.uniform(0.5, 0.9)), "sd": 0.01} for k in (
            "hit@1", "auroc", "held_out_auroc")} for s in sizes}
        for m in methods
    }  # fmt: skip
    return {
        "methods": methods,
        "summary": summary,
        "queries": {"train": 4096, "test": 512},
        "seeds": [0, 1],
        "llms": 8,
        "oracle": 0.95,
        "evidence": sizes,
        "k": sizes,
    }


def _cost_result(methods: list[str]) -> dict[str, Any]:
    hull = [[0.001, 0.5], [0.01, 0.7], [0.1, 0.8]]
    figures = {"aiq": {"mean": 0.7}, "cost_share_at_100": {"mean": 0.5}}
    figures["cost_share_at_95"] = {"mean": 0.3}
    return {
        "methods": methods,
        "per_seed": {m: [{"hull": hull}] for m in methods},
        "summary": {m: figures for m in methods},
        "single_llms": {
            "small": {"cost": 0.001, "accuracy": 0.5},
            "middle": {"cost": 0.01, "accuracy": 0.65},
            "large": {"cost": 0.1, "accuracy": 0.8},
        },
        "llms": 3,
        "queries": {"scored_and_priced_by_every_llm": 300},
        "folds": 5,
        "seeds": [0],
    }


@pytest.fixture
def svg_text() -> Any:
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        yield


@pytest.mark.usefixtures("svg_text")
def test_the_same_method_has_the_same_colour_in_every_plot(tmp_path: Path) -> None:
    from locus.atlas.plots import portfolio_png
    from locus.benchmark.report import plot_anchors, plot_cost, plot_onboarding
    from locus.routing.frontier import plot_frontiers

    methods = ["locus+knn", "locus", "knn", "mf", "irt", "per-task", "best-single"]
    drawn = {
        "anchors": plot_anchors(_sweep_result(methods, ["16", "64"]), tmp_path / "a.svg"),
        "onboarding": plot_onboarding(
            _sweep_result([f"{m}@anchors" for m in methods[:4]], ["8", "32"]), tmp_path / "o.svg"
        ),
        "cost": plot_cost(_cost_result(["locus+knn", "knn", "mf", "per-task"]), tmp_path / "c.svg"),
    }
    seen: dict[str, dict[str, set[str]]] = {}
    for name, path in drawn.items():
        found = _svg_colours(path)
        for method in ("locus+knn", "knn", "mf"):
            label = f"{method}@anchors" if name == "onboarding" else method
            colours = _colour_of(found, label)
            assert colours == {method_colour(method)}, (name, method, colours)
            seen.setdefault(method, {})[name] = colours
    for method, by_plot in seen.items():
        assert len({frozenset(c) for c in by_plot.values()}) == 1, (method, by_plot)
    # `locus evaluate --plot` (the router's own frontier) and the atlas's portfolio curve
    singles = {"small": (0.001, 0.5), "large": (0.1, 0.8)}
    curve = np.array([[0.001, 0.5], [0.1, 0.8]])
    frontier = {"aiq": 0.7, "cost_share_at_100": 1.0, "cost_share_at_95": 0.4}
    path = plot_frontiers(
        singles, {"LOCUS router (both rules)": (curve, frontier)}, tmp_path / "f.svg", title="x"
    )
    found = _svg_colours(path)
    assert _colour_of(found, "LOCUS router") == {method_colour("locus+knn")}
    assert _colour_of(found, "best static mix") == {method_colour("static mix")}
    path = portfolio_png(
        {"k-center": [(1, 0.5), (2, 0.6)], "k-medoids": [(1, 0.5), (2, 0.62)]},
        [(1, 0.4, 0.05), (2, 0.45, 0.05)],
        0.7,
        tmp_path / "p.svg",
    )
    found = _svg_colours(path)
    assert _colour_of(found, "k-center") == {method_colour("k-center")}
    assert method_colour("random") in _colour_of(found, "random")
