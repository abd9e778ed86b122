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
from locus.palette import method_colour

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
    """Accuracy against mean cost per query (log scale): each method's frontier (seed 0's
    pooled out-of-fold predictions; `locus.routing.frontier.plot_frontiers`), every single LLM
    as a labelled point, the best static mix of single LLMs."""
    from locus.routing.frontier import plot_frontiers

    frontiers = {}
    for i, method in enumerate(result["methods"]):
        run = result["per_seed"][method][0]
        figures = {key: result["summary"][method][key]["mean"] for key in _LEGEND}
        label = f"{method} (default)" if i == 0 else method
        frontiers[label] = (np.array(run["hull"]), figures)
    singles = {llm: (v["cost"], v["accuracy"]) for llm, v in result["single_llms"].items()}
    return plot_frontiers(
        singles,
        frontiers,
        path,
        title=title
        or f"cost suite: {result['llms']} LLMs, "
        f"{result['queries']['scored_and_priced_by_every_llm']} queries",
        note=f"Every query tested once per seed ({result['folds']} folds x "
        f"{len(result['seeds'])} seeds); figures are means over seeds.",
    )


_LEGEND = ("aiq", "cost_share_at_100", "cost_share_at_95")


def cost_table(result: dict[str, Any]) -> str:
    """Markdown: per method the frontier's AIQ, the cost shares at which it reaches 100% and
    95% of the strong LLM's accuracy, APGR, CPT(50%) / CPT(80%), the accuracy at the cheapest
    LLM's cost, and the budget re-check (mean ± sd over seeds), then the static mix."""
    best, cheapest = result["best_single"], result["cheapest_single"]
    lines = [
        f"strong LLM {best['llm_id']} ({best['accuracy']:.4f} at {best['cost']:.2e} USD per "
        f"query); cheapest {cheapest['llm_id']} ({cheapest['accuracy']:.4f} at "
        f"{cheapest['cost']:.2e}); costs as shares of the strong LLM's",
        "",
        "| method | AIQ | cost at 100% | cost at 95% | APGR | CPT(50%) | CPT(80%) | accuracy at "
        "the cheapest's cost | budget 25%: spent, accuracy | AUROC |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(value: dict[str, float], digits: int = 4, percent: bool = False) -> str:
        if math.isnan(value["mean"]):
            return "never"
        if percent:
            return f"{100 * value['mean']:.1f}% ± {100 * value['sd']:.1f}"
        return f"{value['mean']:.{digits}f} ± {value['sd']:.{digits}f}"

    for i, method in enumerate(result["methods"]):
        s = result["summary"][method]
        name = f"**{method}**" if i == 0 else method
        budget = (
            f"{cell(s['budget_0.25_spent_over_budget'], 2)}, {cell(s['budget_0.25_accuracy'])}"
            if not math.isnan(s["budget_0.25_accuracy"]["mean"])
            else "skipped (below the cheapest routing)"
        )
        lines.append(
            f"| {name} | {cell(s['aiq'])} | {cell(s['cost_share_at_100'], percent=True)} | "
            f"{cell(s['cost_share_at_95'], percent=True)} | {cell(s['apgr'], 3)} | "
            f"{cell(s['cpt50'], percent=True)} | {cell(s['cpt80'], percent=True)} | "
            f"{cell(s['accuracy_at_cheapest_cost'])} | {budget} | {cell(s['auroc'], 3)} |"
        )
    mix = result["static_mix"]

    def fixed(key: str, percent: bool = False) -> str:
        value = mix.get(key, float("nan"))
        return cell({"mean": value, "sd": 0.0}, 4 if key != "apgr" else 3, percent)

    lines.append(
        f"| static mix of single LLMs | {fixed('aiq')} | {fixed('cost_share_at_100', True)} | "
        f"{fixed('cost_share_at_95', True)} | {fixed('apgr')} | {fixed('cpt50', True)} | "
        f"{fixed('cpt80', True)} | {fixed('accuracy_at_cheapest_cost')} | | |"
    )
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
    """One panel per (metric, y label): a line per method over `sizes` with ± sd error bars
    (bars where there is one size), a legend on every panel. The random LLM is named in the
    caption, not drawn: its far lower line would squash the differences that matter."""
    plt = pyplot()
    xs = _x_positions(result, sizes)
    figure, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.8), squeeze=False)
    shown = [m for m in result["methods"] if m != "random"]
    for (metric, ylabel), axis in zip(panels, axes[0], strict=True):
        drawn = []
        for i, method in enumerate(shown):
            summary = result["summary"][method]
            means = [summary[s][metric]["mean"] for s in sizes]
            sds = [summary[s][metric]["sd"] for s in sizes]
            if all(math.isnan(m) for m in means):
                continue
            drawn.append(method)
            main = method.split("@")[0] in ("locus", "locus+knn")
            if len(sizes) == 1:
                axis.bar(i, means[0], yerr=sds[0], capsize=3, label=method,
                         color=method_colour(method), alpha=1.0 if main else 0.7)  # fmt: skip
                continue
            style = {"linewidth": 2.6, "zorder": 5} if main else {"linewidth": 1.3}
            axis.errorbar(xs, means, yerr=sds, marker="o", markersize=3.5, capsize=2.5,
                          label=method, color=method_colour(method), **style)  # fmt: skip
        if metric == "hit@1" and "oracle" in result:
            axis.axhline(result["oracle"], color=method_colour("oracle"), linestyle=":",
                         label="oracle")  # fmt: skip
        if len(sizes) == 1:
            axis.set_xticks(range(len(shown)), shown, rotation=30, ha="right", fontsize=8)
            axis.set_xlabel(f"{xlabel}: {sizes[0]}")
            lows = [result["summary"][m][sizes[0]][metric]["mean"] for m in drawn]
            finite = [v for v in lows if not math.isnan(v)]
            if finite:
                axis.set_ylim(min(finite) - 0.02, max(finite) + 0.02)
        else:
            axis.set_xscale("log", base=2)
            axis.set_xticks(xs, sizes)
            axis.set_xlabel(xlabel)
        axis.set_ylabel(ylabel)
        axis.grid(alpha=0.3)
        if len(sizes) > 1:
            axis.legend(fontsize=7.5, ncol=2)
    seeds = len(result["seeds"])
    caption = (
        f"{title}: {result['llms']} LLMs, {result['queries']['test']:,} test queries, "
        f"mean ± sd over {seeds} seed{'s' if seeds != 1 else ''}"
    )
    if "random" in result["methods"]:
        first = result["summary"]["random"][sizes[-1]].get("hit@1", {}).get("mean")
        if first is not None and not math.isnan(first):
            caption += f"; a random LLM: hit@1 {first:.3f} (not drawn)"
    figure.suptitle(caption, fontsize=10)
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


def newcomers_table(result: dict[str, Any]) -> str:
    """Markdown: one row per newcomer and k (and their mean per k): the pool's hit@1 with it
    (± sd over seeds) beside without it and it alone, its share; its predicted accuracy's
    error beside its probes'; AUROC and log-loss of its P(correct) beside each baseline's and
    the same LLM's trained in the pool (with the pool's hit@1 then; older results have none)."""
    baselines = result["baselines"]
    head = ("| newcomer | k | hit@1 with it | without / alone | gain | share | accuracy error "
            "(probes') | per task (probes') | AUROC locus" + "".join(f" / {b}" for b in baselines)
            + " | log-loss locus" + "".join(f" / {b}" for b in baselines)
            + " | trained in the pool: hit@1, AUROC |")  # fmt: skip
    lines = [head, "|---" * 11 + "|"]
    for who in [*result["newcomers"], "mean"]:
        for k in result["k"]:
            e = result["summary"][who][str(k)]
            methods = ["locus", *baselines]
            auroc = " / ".join(f"{e[m]['auroc']['mean']:.3f}" for m in methods)
            loss = " / ".join(f"{e[m]['log_loss']['mean']:.3f}" for m in methods)
            lines.append(
                f"| {'**mean**' if who == 'mean' else who} | {k} | {e['hit@1']['mean']:.4f} ± "
                f"{e['hit@1']['sd']:.4f} | {e['without']['mean']:.4f} / {e['alone']['mean']:.4f}"
                f" | {e['gain']['mean']:+.4f} | {e['share']['mean']:.0%} | "
                f"{e['locus']['accuracy_error']['mean']:.3f} ({e['probes_error']['mean']:.3f}) | "
                f"{e['locus']['per_task_error']['mean']:.3f} "
                f"({e['probes_per_task_error']['mean']:.3f}) | {auroc} | {loss} | {_in_pool(e)} |"
            )
    return "\n".join(lines)


def _in_pool(entry: dict[str, Any]) -> str:
    trained = entry.get("in_pool")
    if trained is None:
        return "-"
    return f"{trained['hit@1']['mean']:.4f}, {trained['auroc']['mean']:.3f}"


def plot_newcomers(result: dict[str, Any], path: Path, title: str = "") -> Path:
    """Two panels against the newcomer's probes k (log scale): the pool's hit@1 with it less
    without it, one thin line per newcomer and their mean (± sd over all runs) thick; and the
    AUROC of its P(correct), mean over the newcomers, for LOCUS and each baseline; dashed, the
    same with the newcomers trained in the pool (where the result has it)."""
    plt = pyplot()
    ks = [str(k) for k in result["k"]]
    xs = [float(k) for k in ks]
    summary = result["summary"]
    figure, (gain, auroc) = plt.subplots(1, 2, figsize=(12.8, 4.8))
    for who in result["newcomers"]:
        gain.plot(xs, [summary[who][k]["gain"]["mean"] for k in ks], marker="o", markersize=3,
                  linewidth=1.0, alpha=0.7, label=who[-28:])  # fmt: skip
    gain.errorbar(xs, [summary["mean"][k]["gain"]["mean"] for k in ks],
                  yerr=[summary["mean"][k]["gain"]["sd"] for k in ks], color="black",
                  linewidth=2.6, capsize=3, marker="o", label="mean", zorder=5)  # fmt: skip
    gain.axhline(0.0, color="grey", linestyle=":")
    trained = summary["mean"][ks[0]].get("in_pool")
    if trained is not None:
        ceiling = trained["hit@1"]["mean"] - summary["mean"][ks[0]]["without"]["mean"]
        gain.axhline(ceiling, color="black", linestyle="--", linewidth=1.2,
                     label="trained in the pool")  # fmt: skip
        auroc.axhline(trained["auroc"]["mean"], color=method_colour("locus"), linestyle="--",
                      linewidth=1.2, label="locus, trained in the pool")  # fmt: skip
    gain.set_ylabel("the pool's test hit@1: with the newcomer - without it")
    for method in ["locus", *result["baselines"]]:
        main = method == "locus"
        auroc.plot(xs, [summary["mean"][k][method]["auroc"]["mean"] for k in ks], marker="o",
                   markersize=3.5, color=method_colour(method), label=method,
                   linewidth=2.6 if main else 1.3, zorder=5 if main else 2)  # fmt: skip
    auroc.set_ylabel("newcomers' test correctness AUROC (mean)")
    for axis in (gain, auroc):
        axis.set_xscale("log", base=2)
        axis.set_xticks(xs, ks)
        axis.set_xlabel("the newcomer's probes (k)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7.5, ncol=2)
    seeds = len(result["seeds"])
    figure.suptitle(
        f"{title or 'newcomers suite'}: {len(result['newcomers'])} of {result['llms']} LLMs left "
        f"out and onboarded from k {result['strategy']} probes, {seeds} seed"
        f"{'s' if seeds != 1 else ''} each",
        fontsize=10,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
