"""What `locus evaluate` shows: the routing and correctness table beside the baselines, per
task, the simple baseline that wins; with costs, what each decision rule costs and keeps, and
the accuracy-cost frontier as a PNG (`--plot`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from locus.cli._render import stdout_console

__all__ = ["SMALL_SPLIT", "plot_savings", "render_evaluation", "render_savings"]

# a split under this many queries has a standard error of hit@1 above 3.5 points
SMALL_SPLIT = 200


def plot_savings(result: Any, path: Path) -> None:
    import numpy as np

    from locus.routing.frontier import plot_frontiers

    savings = result.savings
    plot_frontiers(
        savings.singles,
        {"LOCUS router (both rules)": (np.array(savings.hull), savings.frontier)},
        path,
        title=f"{result.split} split, {savings.queries:,} queries, {result.llms} LLMs "
        f"(artifact {result.artifact})",
    )


def render_savings(savings: Any) -> None:
    from rich.table import Table

    from locus.routing.frontier import describe_frontier

    console = stdout_console()
    strong, cheapest = savings.strong, savings.cheapest
    table = Table(
        title=f"what each decision rule costs on {savings.queries:,} queries every LLM was "
        f"scored and priced on (cost share: of {strong['llm_id']}'s, the most accurate)"
        + (
            "; costs estimated: catalog prices on each query's tokens (~4 characters a "
            "token, 256 completion tokens unless recorded)"
            if savings.estimated
            else ""
        ),
        title_justify="left",
    )
    small = savings.spread is not None
    for column in ("rule", "accuracy", "USD/query", "cost share", "note"):
        table.add_column(column, justify="left" if column in ("rule", "note") else "right")
    table.add_row(f"{strong['llm_id']} alone", f"{strong['accuracy']:.4f}",
                  f"{strong['cost']:.2e}", "100%", "")  # fmt: skip
    share = cheapest["cost"] / strong["cost"]
    table.add_row(f"{cheapest['llm_id']} alone", f"{cheapest['accuracy']:.4f}",
                  f"{cheapest['cost']:.2e}", f"{share:.0%}", "")  # fmt: skip
    for row in savings.rules:
        if row["rule"] == "quality":
            name = f"--quality {row['setting']:g}"
        elif row["rule"] == "budget":
            name = f"--budget {row['setting']:.2e}"
        else:
            name = "accuracy routing (locus route)"
        accuracy = f"{row['accuracy']:.4f}" + (f" ± {row['accuracy_se']:.4f}" if small else "")
        cost = f"{row['cost']:.2e}" + (f" ± {row['cost_se']:.1e}" if small else "")
        table.add_row(name, accuracy, cost, f"{row['cost_share']:.0%}", _over_budget(row))
    console.print(table)
    frontier = describe_frontier(savings.frontier)
    if small:
        spread = savings.spread
        frontier += (
            f" (on only {savings.queries} queries: ± {100 * spread['cost_share_at_100_se']:.0f} "
            f"and ± {100 * spread['cost_share_at_95_se']:.0f} points, one standard error over "
            f"resamples of the queries; the most accurate LLM reached on "
            f"{spread['reached_100']:.0%} of them)"
        )
    aiq_se = f" ± {savings.spread['aiq_se']:.4f}" if small else ""
    console.print(
        f"the router's frontier {frontier} (AIQ {savings.frontier['aiq']:.4f}{aiq_se}); the "
        f"best static mix of single LLMs {describe_frontier(savings.static_mix)} (AIQ "
        f"{savings.static_mix['aiq']:.4f})"
    )


def _over_budget(row: dict[str, Any]) -> str:
    """A budget rule that spent more than its budget on these queries, said: by how much, and
    whether beyond noise (two standard errors of its mean cost)."""
    over = row.get("over_budget")
    if over is None:
        return ""
    excess = row["cost"] - row["setting"]
    noise = "beyond noise" if excess > 2 * row["cost_se"] else "within noise"
    return f"[yellow]{over:.0%} over its budget ({noise})[/]"


def render_evaluation(result: Any) -> None:
    from rich.table import Table

    console = stdout_console()
    routing, correct, base = result.routing, result.correctness, result.baselines
    queries = f"{result.queries:,} {'query' if result.queries == 1 else 'queries'}"
    if result.folds is None:
        console.print(
            f"{result.split} split: {queries}, {result.llms} LLMs (artifact {result.artifact})"
        )
    else:
        settings = (
            f"artifact {result.artifact}'s settings"
            if result.artifact
            else "locus fit's default settings: no artifact"
        )
        console.print(
            f"{result.folds}-fold over the queries: {queries}, each routed by a router fitted "
            f"without it, {result.llms} LLMs ({settings})"
        )
    if result.offpolicy is not None:
        _render_offpolicy(result)
        return
    summary = Table(show_header=True)
    summary.add_column("router")
    summary.add_column("hit@1", justify="right")
    if routing.guard is not None:
        moved = f"{routing.moved:.0%} of queries moved off {routing.guard['default']}"
        summary.add_row(f"LOCUS, guarded ({moved})", f"{routing.hit_at_1:.4f}")
        summary.add_row("LOCUS, unguarded (--no-guard)", f"{routing.unguarded_hit_at_1:.4f}")
    else:
        summary.add_row("LOCUS", f"{routing.hit_at_1:.4f}")
    if routing.task_given_hit_at_1 is not None:
        summary.add_row("LOCUS, each query's task given (--task)",
                        f"{routing.task_given_hit_at_1:.4f}")  # fmt: skip
    summary.add_row(f"best single LLM ({base.best_single_llm_id})", f"{base.best_single_llm:.4f}")
    if base.best_llm_per_task_from_text is not None:
        summary.add_row("best LLM per task, the task read from the text",
                        f"{base.best_llm_per_task_from_text:.4f}")  # fmt: skip
    if result.per_task:
        summary.add_row("best LLM per task, the task given", f"{base.best_llm_per_task:.4f}")
    if base.knn is not None:
        summary.add_row("kNN vote (the router's own neighbours)", f"{base.knn:.4f}")
    summary.add_row("random LLM", f"{base.random:.4f}")
    summary.add_row("oracle", f"{base.oracle:.4f}")
    console.print(summary)
    if routing.hit_at_1_se is None:
        console.print(
            f"hit@1 on {queries}: no standard error can be estimated on so few; it says next "
            "to nothing about routing"
        )
    else:
        large = f": large, on only {queries}" if result.few_queries else ""
        line = (
            f"hit@1 {routing.hit_at_1:.4f} ± {routing.hit_at_1_se:.4f} (one standard error{large})"
        )
        if routing.gain is not None and routing.gain_se is not None:
            verdict = (
                "the same answers on every query"
                if routing.gain == 0 and routing.gain_se == 0
                else "within noise (two standard errors)"
                if routing.gain_is_noise
                else "beyond noise"
                if routing.gain > 0
                else "a loss beyond noise"
            )
            line += (
                f"; {routing.gain:+.4f} ± {routing.gain_se:.4f} against the best single LLM on "
                f"the same queries: {verdict}"
            )
        console.print(line)
    if result.folds is None and result.queries < SMALL_SPLIT:
        console.print(
            f"too few {result.split} queries to tell routers apart: `locus evaluate --folds 5` "
            "routes every query of the workspace once, each by a router fitted without it (5 "
            "fits, nothing saved)"
        )
    winner = result.winning_baseline
    if winner is not None:
        name, theirs, against = winner
        se = routing.hit_at_1_se
        noise = (
            "no standard error to tell noise by"
            if se is None
            else "within noise, two standard errors"
            if theirs - against <= 2 * se
            else "beyond noise, two standard errors"
        )
        console.print(
            f"{name} routes these queries better: {theirs:.4f} against {against:.4f} ({noise})"
        )
    # hit@k with k >= the LLMs is the oracle's; AUROC needs right and wrong cells both
    ranks = [
        f"hit@{k} {v:.4f}"
        for k, v in ((3, routing.hit_at_3), (5, routing.hit_at_5))
        if v is not None
    ]
    auroc = "n/a (one class)" if correct.auroc is None else f"{correct.auroc:.4f}"
    if correct.task_given_auroc is not None:
        auroc += f" ({correct.task_given_auroc:.4f} with each query's task given)"
    console.print(
        "  ".join(ranks) + ("  |  " if ranks else "") + f"correctness: accuracy "
        f"{correct.accuracy:.4f}  AUROC {auroc}  Brier {correct.brier:.4f}  ECE {correct.ece:.4f}"
    )
    _render_floors(result)
    if result.per_task:
        tasks = Table(title="per task")
        for column in ("task", "queries", "LOCUS hit@1", "best single", "oracle"):
            tasks.add_column(column, justify="left" if column == "task" else "right")
        for task, row in result.per_task.items():
            tasks.add_row(
                task,
                f"{row.queries:,}",
                f"{row.hit_at_1:.4f}",
                f"{row.best_single_llm:.4f}",
                f"{row.oracle:.4f}",
            )
        console.print(tasks)


def _render_offpolicy(result: Any) -> None:
    """Sparse evidence: each router's off-policy estimates with their 95% intervals, in place
    of the dense table (whose every row would be the logged LLM's score)."""
    from rich.table import Table

    console = stdout_console()
    found = result.offpolicy
    console.print(found.overlap.describe(), markup=False)
    table = Table(title="estimated hit@1 (95% interval)", show_header=True)
    for column in ("router", "inverse propensity (IPS)", "doubly robust (DR)"):
        table.add_column(column, justify="left" if column == "router" else "right")
    for name, by in found.estimates.items():
        cells = []
        for method in ("ips", "dr"):
            e = by[method]
            low, high = e.interval
            cells.append(f"{e.value:.4f} [{low:.4f}, {high:.4f}]")
        table.add_row(name, *cells)
    console.print(table)
    console.print(
        f"logging probabilities: {found.propensity}; DR's reward model is the router's own "
        "P(correct). No oracle or random row: on a log they would be the logged LLM's score."
    )
    correct = result.correctness
    auroc = "n/a (one class)" if correct.auroc is None else f"{correct.auroc:.4f}"
    console.print(
        f"correctness on the {correct.cells:,} scored cells: accuracy {correct.accuracy:.4f}  "
        f"AUROC {auroc}  Brier {correct.brier:.4f}  ECE {correct.ece:.4f}"
    )
    _render_floors(result)
    if result.folds is None and result.queries < SMALL_SPLIT:
        console.print(
            f"too few {result.split} queries for narrow intervals: `locus evaluate --folds 5` "
            "estimates on every query of the workspace, each routed by a router fitted "
            "without it (5 fits, nothing saved)"
        )


def _render_floors(result: Any) -> None:
    """The router's P(correct) log-loss beside the simple predictors' on the same cells, and
    the one that reads them better, with how far beyond noise."""
    from locus.pipeline.evaluation_results import FLOORS

    correct = result.correctness
    if correct.log_loss is None or not correct.floors:
        return
    console = stdout_console()
    beside = ", ".join(
        f"{FLOORS.get(name, name)} {floor.log_loss:.4f}" for name, floor in correct.floors.items()
    )
    told = [f.router_log_loss for f in correct.floors.values() if f.router_told]
    given = f" ({told[0]:.4f} with each query's task given)" if told else ""
    console.print(f"P(correct) log-loss {correct.log_loss:.4f}{given}; on the same cells: {beside}")
    winner = result.winning_floor
    if winner is None:
        return
    name, floor = winner
    se = floor.gain_se
    noise = (
        "no standard error to tell noise by"
        if se is None
        else "within noise, two standard errors"
        if -floor.gain <= 2 * se
        else "beyond noise, two standard errors"
    )
    router = " (the router told each query's task)" if floor.router_told else ""
    console.print(
        f"{FLOORS.get(name, name)} reads these cells better: log-loss {floor.log_loss:.4f} "
        f"against {floor.router_log_loss:.4f}{router} ({noise})"
    )
