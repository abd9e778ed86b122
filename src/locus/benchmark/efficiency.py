"""The `efficiency` suite: how much evidence each method needs to match LOCUS.

Read off an anchors-suite result: for LOCUS's mean test hit@1 (and AUROC) at A scores per LLM
(default A = 128 and 256), the evidence at which each other method's mean first reaches it,
interpolated linearly in log2(evidence) between the sweep's sizes. The ratio needed / A is the
paper's "N times fewer evaluations"; a method that never reaches LOCUS's figure on the sweep
gets no ratio, only "more than the largest size".

    >>> result = {"evidence": ["16", "64"], "methods": ["locus", "knn"], "summary": {
    ...     "locus": {"16": {"hit@1": {"mean": 0.6}}, "64": {"hit@1": {"mean": 0.7}}},
    ...     "knn": {"16": {"hit@1": {"mean": 0.5}}, "64": {"hit@1": {"mean": 0.6}}}}}
    >>> round(evidence_to_match(result, "knn", 0.55, "hit@1"), 6)
    32.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from locus.errors import LocusInputError

__all__ = ["efficiency_from_anchors", "efficiency_table", "evidence_to_match"]


def _numeric_sizes(result: dict[str, Any]) -> list[str]:
    return [s for s in result["evidence"] if s != "all"]


def evidence_to_match(
    result: dict[str, Any], method: str, target: float, metric: str
) -> float | None:
    """Smallest evidence per LLM at which `method`'s mean `metric` reaches `target`
    (log-linear interpolation between sweep sizes); None if it never does."""
    sizes = _numeric_sizes(result)
    points = [(int(s), result["summary"][method][s][metric]["mean"]) for s in sizes]
    points = [(a, v) for a, v in points if not math.isnan(v)]
    previous: tuple[int, float] | None = None
    for size, value in points:
        if value >= target:
            if previous is None:
                return float(size)
            low, low_value = previous
            fraction = (target - low_value) / (value - low_value)
            return float(2 ** (math.log2(low) + fraction * (math.log2(size) - math.log2(low))))
        previous = (size, value)
    return None


def efficiency_from_anchors(
    result: dict[str, Any],
    *,
    at: Sequence[int] = (128, 256),
    metrics: Sequence[str] = ("hit@1", "auroc"),
) -> dict[str, Any]:
    """Per method, metric and LOCUS evidence size: LOCUS's figure, the evidence the method
    needs to reach it, and needed / size.

    Raises:
        LocusInputError: the result has no LOCUS or lacks one of the sizes `at`.
    """
    if "locus" not in result["methods"]:
        raise LocusInputError("the efficiency suite needs LOCUS in the anchors result")
    missing = [a for a in at if str(a) not in result["evidence"]]
    if missing:
        raise LocusInputError(
            f"the anchors result has no evidence size {missing[0]}; it has "
            f"{', '.join(result['evidence'])}"
        )
    largest = max(int(s) for s in _numeric_sizes(result))
    rows = []
    for method in result["methods"]:
        if method in ("locus", "random"):
            continue
        for metric in metrics:
            for size in at:
                target = result["summary"]["locus"][str(size)][metric]["mean"]
                needed = evidence_to_match(result, method, target, metric)
                rows.append(
                    {
                        "method": method,
                        "metric": metric,
                        "locus_evidence": size,
                        "locus_value": target,
                        "evidence_needed": needed,
                        "ratio": None if needed is None else needed / size,
                        "reached": needed is not None,
                        "largest_tried": largest,
                    }
                )
    return {
        "suite": "efficiency",
        "from": "anchors",
        "at": list(at),
        "metrics": list(metrics),
        "seeds": result["seeds"],
        "rows": rows,
    }


def efficiency_table(efficiency: dict[str, Any]) -> str:
    """Markdown: per method, the evidence needed to match LOCUS at each size and metric."""
    columns = [(m, a) for m in efficiency["metrics"] for a in efficiency["at"]]
    header = " | ".join(f"{m} of LOCUS at {a}" for m, a in columns)
    lines = [f"| method | {header} |", "|---|" + "---|" * len(columns)]
    by_method: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
    for row in efficiency["rows"]:
        by_method.setdefault(row["method"], {})[(row["metric"], row["locus_evidence"])] = row
    for method, cells in by_method.items():
        rendered = []
        for key in columns:
            row = cells[key]
            if row["reached"]:
                rendered.append(f"{row['evidence_needed']:.0f} ({row['ratio']:.1f}x)")
            else:
                rendered.append(f"> {row['largest_tried']} (not reached)")
        lines.append(f"| {method} | {' | '.join(rendered)} |")
    return "\n".join(lines)
