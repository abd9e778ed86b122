"""The `stream` suite's result out: its mean ± sd over seeds, a Markdown table and the
cumulative regret curves."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from locus._plotting import pyplot
from locus.benchmark._stats import mean_sd
from locus.palette import CATEGORICAL, method_colour

__all__ = ["plot_stream", "stream_table", "summary_of"]


def _cell(value: dict[str, float] | None, digits: int = 4) -> str:
    if value is None or math.isnan(value["mean"]):
        return "-"
    return f"{value['mean']:.{digits}f} ± {value['sd']:.{digits}f}"


def stream_table(result: dict[str, Any]) -> str:
    """Markdown: per scenario and policy, hit@1, the regret against the oracle at the stream's
    end, the cost per request where known, and on the swap how the swapped LLM's requests
    fell (mean ± sd over seeds); then the off-policy estimates beside their truth."""
    swap, best = result["swap"], result["hindsight_best_single"]
    lines = [
        f"{result['requests']:,} requests, {result['llms']} LLMs, explore "
        f"{result['explore']:g}; oracle {result['oracle']:.4f}, hindsight best single "
        f"{best['llm_id']} {best['hit@1']:.4f}"
        f"; swap: {swap['swapped']} (mean {swap['swapped_mean']:.3f}) answers as "
        f"{swap['answers_as']} (mean {swap['answers_as_mean']:.3f}) from request {swap['at']}",
        "",
        "| scenario | policy | hit@1 | regret | cost | swapped LLM's requests after the swap: "
        "all, until its share < 10% | alarm delay / false alarms per 10,000 |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, row in result["summary"].items():
        scenario, policy = key.split(" / ")
        swapped = "-"
        if "swapped_requests_after" in row:
            settled = row["swapped_requests_until_under_10pct"]
            swapped = (
                f"{_cell(row['swapped_requests_after'], 1)}, {_cell(settled, 1)} "
                f"({row['settled_in']} of {len(result['seeds'])} settled)"
            )
        alarm = "-"
        if "alarm_delay" in row:
            alarm = f"{_cell(row['alarm_delay'], 1)} ({row['alarm_raised']} raised)"
        elif "false_alarms_per_10000" in row:
            alarm = f"{row['false_alarms_per_10000']:.1f}"
        lines.append(
            f"| {scenario} | {policy} | {_cell(row['hit@1'])} | {_cell(row['regret'], 1)} | "
            f"{_cell(row.get('cost'), 6)} | {swapped} | {alarm} |"
        )
    if result["offpolicy"]:
        lines += [
            "",
            "off-policy estimates from locus's exploring log (95% intervals), beside the truth:",
            "",
            "| seed | target | truth | IPS | DR |",
            "|---|---|---|---|---|",
        ]
        for entry in result["offpolicy"]:
            for target in ("locus-static", "best single LLM"):
                found = entry[target]
                shown = [
                    f"{found[m]['value']:.4f} [{found[m]['interval'][0]:.4f}, "
                    f"{found[m]['interval'][1]:.4f}]" + ("" if found[m]["covers"] else " (misses)")
                    for m in ("ips", "dr")
                ]
                lines.append(
                    f"| {entry['seed']} | {target} | {found['truth']:.4f} | {shown[0]} | "
                    f"{shown[1]} |"
                )
    return "\n".join(lines)


def plot_stream(result: dict[str, Any], path: Path, title: str = "") -> Path:
    """Cumulative regret against the oracle over the stream, one panel per scenario, one line
    per policy (seed 0), the swap (the drift's start) marked."""
    plt = pyplot()
    scenarios = list(result["per_seed"])
    figure, axes = plt.subplots(1, len(scenarios), figsize=(5.6 * len(scenarios), 4.6))
    axes = axes if len(scenarios) > 1 else [axes]
    for axis, scenario in zip(axes, scenarios, strict=True):
        for i, (policy, runs) in enumerate(result["per_seed"][scenario].items()):
            if not runs:
                continue
            curve = runs[0]["regret_curve"]
            main = policy == "locus"
            colour = method_colour("locus") if policy.startswith("locus") else CATEGORICAL[i + 1]
            axis.plot([x for x, _ in curve], [y for _, y in curve], label=policy, color=colour,
                      linewidth=2.6 if main else 1.3, zorder=5 if main else 2,
                      linestyle="--" if policy == "locus-static" else "-")  # fmt: skip
        if scenario != "no change":
            axis.axvline(result["swap"]["at"], color="grey", linestyle=":", label=scenario)
        axis.set_title(scenario)
        axis.set_xlabel("requests")
        axis.set_ylabel("cumulative regret (oracle hits - policy hits)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(
        f"{title or 'stream suite'}: {result['requests']:,} requests, {result['llms']} LLMs, "
        f"explore {result['explore']:g} (seed 0)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def summary_of(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Mean ± sd over seeds of each scenario and policy's figures."""
    out: dict[str, Any] = {}
    for scenario, by_policy in runs.items():
        for policy, found in by_policy.items():
            if not found:
                continue
            row: dict[str, Any] = {
                "hit@1": mean_sd([f["hit@1"] for f in found]),
                "regret": mean_sd([f["regret"] for f in found]),
            }
            if "cost" in found[0]:
                row["cost"] = mean_sd([f["cost"] for f in found])
            if "swapped_requests_after" in found[0]:
                row["swapped_requests_after"] = mean_sd(
                    [f["swapped_requests_after"] for f in found]
                )
                settled = [f["swapped_requests_until_under_10pct"] for f in found]
                row["swapped_requests_until_under_10pct"] = mean_sd(settled)
                row["settled_in"] = sum(s is not None for s in settled)
            if policy == "locus" and scenario != "no change":
                delays = [f["alarm_delay"] for f in found]
                row["alarm_delay"] = mean_sd(delays)
                row["alarm_raised"] = sum(d is not None for d in delays)
            if policy == "locus" and scenario == "no change":
                outcomes = sum(f["requests"] for f in found)
                row["false_alarms_per_10000"] = 10_000 * sum(f["alarms"] for f in found) / outcomes
            out[f"{scenario} / {policy}"] = row
    return out
