"""Suite results out: a JSON file (with commit and machine), a PNG plot, a Markdown table."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from locus._plotting import pyplot

__all__ = [
    "anchors_table",
    "cost_table",
    "onboarding_table",
    "plot_anchors",
    "plot_cost",
    "plot_onboarding",
    "write_suite_json",
]


def _commit() -> str | None:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None


def write_suite_json(result: dict[str, Any], path: Path, pool: str) -> Path:
    """`result` with the pool, commit, machine and time, as JSON at `path`."""
    payload = {
        "pool": pool,
        "commit": _commit(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.machine(),
        },
        **result,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=1, allow_nan=True, default=float)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(text + "\n")
    temporary.replace(path)
    return path


def plot_cost(result: dict[str, Any], path: Path, title: str = "") -> Path:
    """Accuracy vs mean cost per query: each method's hull (seed 0's points), the single LLMs
    and their hull (the best static mix)."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(8, 5.2))
    for method in result["methods"]:
        run = result["per_seed"][method][0]
        curve = np.array(run["hull"])
        style = {"linewidth": 2.6, "zorder": 5} if method == "locus" else {"linewidth": 1.3}
        aiq = result["summary"][method]["aiq"]["mean"]
        axis.plot(curve[:, 0], curve[:, 1], marker=".", label=f"{method} (AIQ {aiq:.3f})", **style)
    singles = result["single_llms"]
    xs = [v["cost"] for v in singles.values()]
    ys = [v["accuracy"] for v in singles.values()]
    axis.scatter(xs, ys, color="black", s=14, zorder=6, label="single LLMs")
    for name, value in singles.items():
        axis.annotate(name.split("/")[-1][:18], (value["cost"], value["accuracy"]), fontsize=6,
                      xytext=(3, 2), textcoords="offset points")  # fmt: skip
    mix = np.array(result["static_mix"]["hull"])
    axis.plot(mix[:, 0], mix[:, 1], color="grey", linestyle="--",
              label=f"best static mix (AIQ {result['static_mix']['aiq']:.3f})")  # fmt: skip
    axis.set_xscale("log")
    axis.set_xlabel("mean cost per test query (USD)")
    axis.set_ylabel("test accuracy")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    axis.set_title(
        title or f"cost suite: {result['llms']} LLMs, {result['queries']['test']} test queries"
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def cost_table(result: dict[str, Any]) -> str:
    """Markdown: per method AIQ, best accuracy, cost to match the best single LLM, accuracy at
    the cheapest LLM's cost (mean ± sd over seeds)."""
    best, cheapest = result["best_single"], result["cheapest_single"]
    lines = [
        "| method | AIQ | max accuracy | cost to match "
        f"{best['llm_id']} ({best['accuracy']:.4f} at {best['cost']:.2e}) | accuracy at "
        f"{cheapest['llm_id']}'s cost ({cheapest['cost']:.2e}) |",
        "|---|---|---|---|---|",
    ]

    def cell(value: dict[str, float], digits: int = 4, sci: bool = False) -> str:
        if math.isnan(value["mean"]):
            return "not reached"
        if sci:
            return f"{value['mean']:.2e} ± {value['sd']:.1e}"
        return f"{value['mean']:.{digits}f} ± {value['sd']:.{digits}f}"

    for method in result["methods"]:
        s = result["summary"][method]
        name = f"**{method}**" if method == "locus" else method
        lines.append(
            f"| {name} | {cell(s['aiq'])} | {cell(s['max_accuracy'])} | "
            f"{cell(s['cost_to_match_best_single'], sci=True)} | "
            f"{cell(s['accuracy_at_cheapest_cost'])} |"
        )
    lines.append(f"| static mix of single LLMs | {result['static_mix']['aiq']:.4f} | | | |")
    return "\n".join(lines)


def _x_positions(result: dict[str, Any], sizes: list[str]) -> list[float]:
    """Sizes on the x axis; "all" at the number of training queries."""
    train = result["queries"]["train"]
    return [float(train) if size == "all" else float(size) for size in sizes]


def _plot_sweep(
    result: dict[str, Any],
    sizes: list[str],
    panels: list[tuple[str, str]],
    xlabel: str,
    title: str,
    path: Path,
) -> Path:
    """One panel per (metric, y label): a line per method over `sizes`, ± sd error bars."""
    plt = pyplot()
    xs = _x_positions(result, sizes)
    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.6), squeeze=False)
    for (metric, ylabel), axis in zip(panels, axes[0], strict=True):
        for method in result["methods"]:
            if method == "random" and metric != "hit@1":
                continue
            summary = result["summary"][method]
            means = [summary[s][metric]["mean"] for s in sizes]
            sds = [summary[s][metric]["sd"] for s in sizes]
            if all(math.isnan(m) for m in means):
                continue
            style = {"linewidth": 2.6, "zorder": 5} if method == "locus" else {"linewidth": 1.3}
            axis.errorbar(xs, means, yerr=sds, marker="o", markersize=3.5, capsize=2.5,
                          label=method, **style)  # fmt: skip
        if metric == "hit@1" and "oracle" in result:
            axis.axhline(result["oracle"], color="grey", linestyle=":", label="oracle")
        axis.set_xscale("log", base=2)
        axis.set_xticks(xs, sizes)
        axis.set_xlabel(xlabel)
        axis.set_ylabel(ylabel)
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, ncol=2)
    seeds = len(result["seeds"])
    figure.suptitle(
        f"{title}: {result['llms']} LLMs, {result['queries']['test']:,} test queries, "
        f"mean ± sd over {seeds} seed{'s' if seeds != 1 else ''}"
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def plot_anchors(result: dict[str, Any], path: Path, title: str = "") -> Path:
    """hit@1 and AUROC vs evidence per LLM, one line per method with ± sd error bars."""
    panels = [("hit@1", "test routing hit@1"), ("auroc", "test correctness AUROC")]
    label = "scores per LLM (evidence)"
    return _plot_sweep(result, result["evidence"], panels, label, title or "anchors suite", path)


def plot_onboarding(result: dict[str, Any], path: Path, title: str = "") -> Path:
    """Held-out AUROC and whole-pool hit@1 vs the onboarded LLMs' scores, one line per method."""
    panels = [
        ("held_out_auroc", "held-out LLMs: test correctness AUROC"),
        ("hit@1", "whole pool: test routing hit@1"),
    ]
    label = "scores per onboarded LLM (k)"
    return _plot_sweep(result, result["k"], panels, label, title or "onboarding suite", path)


def onboarding_table(
    result: dict[str, Any], metric: str = "held_out_auroc", digits: int = 4
) -> str:
    """Markdown: one row per method, one column per k, mean ± sd of `metric`."""
    return _method_table(result, result["k"], metric, digits)


def anchors_table(result: dict[str, Any], metric: str = "hit@1", digits: int = 4) -> str:
    """Markdown: one row per method, one column per evidence size, mean ± sd of `metric`."""
    return _method_table(result, result["evidence"], metric, digits)


def _method_table(result: dict[str, Any], sizes: list[str], metric: str, digits: int) -> str:
    lines = [
        f"| method | {' | '.join(sizes)} |",
        "|---|" + "---|" * len(sizes),
    ]
    for method in result["methods"]:
        cells = []
        for size in sizes:
            value = result["summary"][method][size][metric]
            cells.append(
                ""
                if math.isnan(value["mean"])
                else f"{value['mean']:.{digits}f} ± {value['sd']:.{digits}f}"
            )
        name = f"**{method}**" if method == "locus" else method
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)
