"""The ablation table: what each part of the fitted router buys on a real pool.

For each seed, LOCUS is trained once on the workspace's hash split (as `locus fit` trains it),
the kNN router is fitted once, and every part's inputs (LOCUS's logits, the kNN votes at each
k, the task votes with and without the task reader) are read once on the training, validation
and test queries. Then the stack and the guard are fitted again for each variant, a part taken
out, exactly as `locus fit` fits them (`fit_stack`, `base_rate_shift`, `fit_default_guard`),
and the test queries are scored: hit@1 (guarded, as the router routes, and unguarded), AUROC,
log-loss and ECE of P(correct). Each row is the variant minus the full router, mean ± sd over
seeds (paired: the same LOCUS and votes on both sides).

Run: `.venv/bin/python benchmarks/bench_ablation.py --dataset bfcl --seeds 0 1 2`
(the workspaces are bench_accuracy.py's: `.bench/accuracy/<dataset>`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, write_results
from bench_accuracy import DATASETS, prepare

from locus.calibration import sigmoid
from locus.locus import Locus
from locus.metrics import (
    chosen_accuracy,
    correctness_metrics,
    log_loss,
    logit_log_loss,
    routing_accuracy,
)
from locus.nn import TrainingConfig
from locus.pipeline import workspace_table
from locus.routing import Evidence, LocusRouter
from locus.routing.costs import CostModel
from locus.routing.decision import RouteRequest, choose
from locus.routing.frontier import frontier_metrics, frontier_of
from locus.routing.guard import fit_default_guard
from locus.routing.neighbours import KNNRouter
from locus.routing.stack import (
    STACK_KS,
    Stack,
    base_rate_shift,
    choose_level,
    choose_weight,
    fit_stack,
    mix,
    smoothed_vote,
)
from locus.routing.stacked_fit import knn_task_votes, knn_votes
from locus.store import Store

SPLITS = ("train", "val", "test")


@dataclass
class Inputs:
    """Every part's reading of one split: LOCUS's logits, the kNN votes {k: (n, L)}, the task
    votes with the reader and without, and the scores."""

    logits: np.ndarray
    votes: dict[int, np.ndarray]
    tasks: np.ndarray | None
    tasks_unread: np.ndarray | None
    truth: np.ndarray


@dataclass(frozen=True)
class Variant:
    """A router with one part changed: the stack's fit arguments and what is done after."""

    name: str
    what: str
    ks: tuple[int, ...] = STACK_KS
    tasks: str = "read"  # "read" (the reader's), "neighbours" (without it), "none" (no part)
    use_locus: bool = True
    level: str = "knn"
    smoothed: bool = True
    shift: bool = True
    guard: bool = True
    locus_alone: bool = False


VARIANTS = (
    Variant("full", "the router locus fit keeps"),
    Variant("-locus", "LOCUS has no say: neither in the level nor in which LLM", use_locus=False),
    Variant("-knn50", "no local kNN vote (50 neighbours)", ks=(500,)),
    Variant("-knn500", "no regional kNN vote (500 neighbours)", ks=(50,)),
    Variant("-knn", "no kNN vote among the parts", ks=()),
    Variant("-task vote", "no task vote part", tasks="none"),
    Variant("-task reader", "the task vote reads its neighbours' tasks only", tasks="neighbours"),
    Variant("level=tasks", "the level's mixture reads the task vote, not kNN", level="tasks"),
    Variant(
        "level by votes",
        "the level reads the task vote where it reads the validation cells better than the kNN "
        "vote (the small pools' rule, on validation)",
        level="votes",
    ),
    Variant(
        "level by mixtures",
        "the level of the lower validation log-loss of LOCUS mixed with its vote",
        level="mixtures",
    ),
    Variant(
        "level by levels",
        "the level of the lower validation log-loss of the level alone (no deviations)",
        level="levels",
    ),
    Variant(
        "level by stacks",
        "both stacks fitted; the level of the lower validation log-loss",
        level="stacks",
    ),
    Variant("-smoothing", "the level's kNN vote read raw", smoothed=False),
    Variant("-shift", "no base-rate shift", shift=False),
    Variant("-guard", "routed unguarded", guard=False),
    Variant("locus alone", "LOCUS's calibrated P(correct) alone (guarded)", locus_alone=True),
)


def read_inputs(
    router: LocusRouter, knn: KNNRouter, evidence: dict[str, Evidence]
) -> dict[str, Inputs]:
    ids = list(router.llm_ids)
    needed = sorted({*STACK_KS, knn.k_})
    out = {}
    for split, part in evidence.items():
        tasks = unread = None
        if knn.has_task_vote:
            tasks = knn_task_votes(knn, part.vectors, ids)
            with_reader = knn.task_vote_
            knn.task_vote_ = replace(with_reader, reader=None)
            try:
                unread = knn_task_votes(knn, part.vectors, ids)
            finally:
                knn.task_vote_ = with_reader
        out[split] = Inputs(
            np.asarray(router.predict_logits(part.vectors), np.float64),
            knn_votes(knn, part.vectors, ids, needed),
            tasks,
            unread,
            np.asarray(part.scores, np.float64),
        )
    return out


@dataclass(frozen=True)
class Prices:
    """What the RouterBench cost suite's AIQ reads on the test queries every LLM was scored and
    priced on (`complete`): the cost model's predicted costs (fitted on the training queries),
    the real ones, and the single LLMs' (mean cost, accuracy) points that bound the frontier."""

    complete: np.ndarray
    predicted: np.ndarray
    real: np.ndarray
    strong: tuple[float, float]
    weak: tuple[float, float]
    high: float

    @classmethod
    def of(cls, data: Any, rows: dict[str, np.ndarray]) -> Prices | None:
        costs = data.table.costs
        if costs is None or np.isnan(costs).all():
            return None
        train, test = rows["train"], rows["test"]
        model = CostModel().fit(data.vectors[train], costs[train], data.table.llm_ids)
        truth, real = data.table.scores[test], costs[test]
        complete = ~np.isnan(truth).any(axis=1) & ~np.isnan(real).any(axis=1)
        points = np.column_stack([real[complete].mean(axis=0), truth[complete].mean(axis=0)])
        strong, weak = int(np.argmax(points[:, 1])), int(np.argmin(points[:, 0]))
        return cls(
            complete,
            np.asarray(model.predict(data.vectors[test]), np.float64)[complete],
            real[complete].astype(np.float64),
            (float(points[strong, 0]), float(points[strong, 1])),
            (float(points[weak, 0]), float(points[weak, 1])),
            float(points[:, 0].max()),
        )

    def aiq(self, proba: np.ndarray, truth: np.ndarray) -> dict[str, float]:
        """AIQ and the cost share at 95% of the strong LLM's accuracy of `proba`'s frontier."""
        curve = frontier_of(proba[self.complete], self.predicted, truth[self.complete], self.real)
        found = frontier_metrics(curve, self.strong, self.weak, self.high)
        return {"aiq": found["aiq"], "cost_share_at_95": found["cost_share_at_95"]}


def score_variant(
    variant: Variant,
    inputs: dict[str, Inputs],
    mix_k: int,
    ids: list[str],
    prices: Prices | None = None,
) -> dict[str, float]:
    def task_votes(split: str) -> np.ndarray | None:
        if variant.tasks == "none":
            return None
        return inputs[split].tasks if variant.tasks == "read" else inputs[split].tasks_unread

    level = variant.level if task_votes("val") is not None else "knn"
    val = inputs["val"]
    if level == "votes":
        level = choose_level(val.votes[mix_k], mix_k, task_votes("val"), val.truth)
    elif level in ("mixtures", "levels"):
        read = {}
        for kind in ("knn", "tasks"):
            beside = (
                task_votes("val") if kind == "tasks" else smoothed_vote(val.votes[mix_k], mix_k)
            )
            weight = choose_weight(sigmoid(val.logits), beside, val.truth)
            if level == "mixtures":
                read[kind] = log_loss(mix(sigmoid(val.logits), beside, weight), val.truth)
            else:
                flat = Stack(
                    variant.ks, (0.0,) * (1 + len(variant.ks) + 1), weight, mix_k,
                    tasks=True, level=kind,
                )  # fmt: skip
                read[kind] = logit_log_loss(
                    flat.logits(val.logits, val.votes, task_votes("val")), val.truth
                )
        level = min(read, key=lambda kind: (read[kind], kind))
    elif level == "stacks":
        read = {}
        for kind in ("knn", "tasks"):
            candidate = fit_stack(
                val.logits, val.votes, val.truth, ks=variant.ks, mix_k=mix_k,
                task_votes=task_votes("val"), level=kind,
            )  # fmt: skip
            read[kind] = logit_log_loss(
                candidate.logits(val.logits, val.votes, task_votes("val")), val.truth
            )
        level = min(read, key=lambda kind: (read[kind], kind))
    if variant.locus_alone:
        logits_of: Callable[[str], np.ndarray] = lambda split: inputs[split].logits  # noqa: E731
    else:
        stack = fit_stack(
            val.logits, val.votes, val.truth, ks=variant.ks, mix_k=mix_k,
            task_votes=task_votes("val"), use_locus=variant.use_locus, level=level,
        )  # fmt: skip
        stack = replace(stack, smoothed=variant.smoothed)

        def stacked_by(stack: Stack) -> Callable[[str], np.ndarray]:
            return lambda split: stack.logits(
                inputs[split].logits, inputs[split].votes, task_votes(split)
            )

        if variant.shift:  # as fit_locus_knn_stack: over the training and validation cells
            unshifted = stacked_by(stack)
            both = np.concatenate([unshifted("train"), unshifted("val")])
            truth = np.concatenate([inputs["train"].truth, inputs["val"].truth])
            stack = replace(stack, shift=base_rate_shift(both, truth))
        logits_of = stacked_by(stack)
    val_proba = sigmoid(logits_of("val"))
    test_proba = sigmoid(logits_of("test"))
    truth = inputs["test"].truth
    guard = fit_default_guard(val_proba, inputs["train"].truth, inputs["val"].truth, ids)
    routed = routing_accuracy(test_proba, truth)
    guarded = routed
    if variant.guard and guard is not None:
        # each query among the LLMs scored on it, as evaluate routes a sparse pool
        choice = choose(
            test_proba,
            None,
            RouteRequest(),
            allowed=~np.isnan(truth),
            guard=(ids.index(guard.default), guard.margin),
        )
        guarded = chosen_accuracy(choice, truth)
    correctness = correctness_metrics(test_proba, truth)
    return {
        "hit@1": guarded,
        "unguarded_hit@1": routed,
        **{m: correctness[m] for m in ("auroc", "log_loss", "ece")},
        **({} if prices is None else prices.aiq(test_proba, truth)),
        "level_tasks": float(level == "tasks" and not variant.locus_alone),
    }


def run_seed(
    store: Any, seed: int, config: TrainingConfig
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    data = workspace_table(store, split_seed=0)
    table = data.table
    rows = {split: data.rows(split) for split in SPLITS}
    started = time.perf_counter()
    model = Locus(replace(config, seed=seed)).fit(
        table, data.vectors, rows["train"], rows["val"], text_encoder_name=data.encoder
    )
    trained = time.perf_counter() - started
    router = LocusRouter(model)
    evidence = {s: Evidence.from_table(table, data.vectors, rows[s]) for s in SPLITS}
    started = time.perf_counter()
    knn = KNNRouter().fit(evidence["train"], evidence["val"])
    inputs = read_inputs(router, knn, evidence)
    read = time.perf_counter() - started
    ids = list(router.llm_ids)
    assert ids == list(table.llm_ids)  # the prices' columns
    prices = Prices.of(data, rows)
    results = {}
    for variant in VARIANTS:
        results[variant.name] = score_variant(variant, inputs, knn.k_, ids, prices)
        figures = results[variant.name]
        print(
            f"seed {seed} {variant.name:>13}: hit@1 {figures['hit@1']:.4f} "
            f"(unguarded {figures['unguarded_hit@1']:.4f}) AUROC {figures['auroc']:.4f} "
            f"log-loss {figures['log_loss']:.4f} ECE {figures['ece']:.4f}",
            flush=True,
        )
    return results, {
        "train_seconds": trained,
        "read_seconds": read,
        "test_queries": len(rows["test"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="bfcl", choices=DATASETS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tag", default="", help="Suffix of the result name.")
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    parser.add_argument(
        "--log",
        type=int,
        default=None,
        metavar="SEED",
        help="The one-LLM-per-query log of the pool that bench_log_pools.py made with this seed "
        "(<workspace>/<dataset>-log<SEED>), as it is: nothing imported.",
    )
    args = parser.parse_args()
    if args.log is None:
        store = prepare(args.dataset, args.workspace / args.dataset)
    else:
        store = Store.open(args.workspace / f"{args.dataset}-log{args.log}", create=False)
        args.tag = f"-log{args.log}{args.tag}"
    per_seed = [run_seed(store, seed, TrainingConfig()) for seed in args.seeds]
    metrics = tuple(per_seed[0][0]["full"])  # with "aiq" on a pool with prices
    table: dict[str, Any] = {}
    for variant in VARIANTS:
        row: dict[str, Any] = {"what": variant.what}
        for metric in metrics:
            values = [seed[0][variant.name][metric] for seed in per_seed]
            gaps = [seed[0][variant.name][metric] - seed[0]["full"][metric] for seed in per_seed]
            row[metric] = {
                "mean": statistics.fmean(values),
                "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                "minus_full": statistics.fmean(gaps),
                "minus_full_sd": statistics.stdev(gaps) if len(gaps) > 1 else 0.0,
            }
        table[variant.name] = row
    print(
        f"\n{args.dataset}, seeds {args.seeds}: variant minus the full router, mean (sd) over seeds"
    )
    print(f"{'variant':>13} " + " ".join(f"{m:>22}" for m in metrics))
    for name, row in table.items():
        cells = [
            f"{row[m]['mean']:.4f} {row[m]['minus_full']:+.4f}({row[m]['minus_full_sd']:.4f})"
            for m in metrics
        ]
        print(f"{name:>13} " + " ".join(f"{c:>22}" for c in cells))
    figures = {
        "dataset": args.dataset,
        "seeds": args.seeds,
        "variants": table,
        "timings": [seed[1] for seed in per_seed],
    }
    print(f"written {write_results(f'ablation-{args.dataset}{args.tag}', figures)}")
    store.close()


if __name__ == "__main__":
    main()


def markdown_table(
    results: Path,
    pools: tuple[str, ...] = ("mmlu-pro", "zeroeval", "bfcl", "split2-model7", "routerbench"),
) -> str:
    """The ablation table as markdown from `results/ablation-<pool>.json`: per part and pool,
    the change of hit@1, AUROC, log-loss and ECE when it is taken out (mean over seeds), in
    bold where it costs more than one standard deviation of the full router's figure over the
    seeds (for hit@1 at least one test query's worth)."""
    import json

    found = {p: json.loads((results / f"ablation-{p}.json").read_text())["figures"] for p in pools}
    metrics = (
        ("hit@1", "hit@1", 1),
        ("AUROC", "auroc", 1),
        ("log-loss", "log_loss", -1),
        ("ECE", "ece", -1),
    )
    head = "| part taken out | " + " | ".join(pools) + " |"
    lines = [head, "|" + "---|" * (len(pools) + 1)]
    full_cells = []
    for pool in pools:
        row = found[pool]["variants"]["full"]
        full_cells.append(
            " · ".join(
                f"{label} {row[key]['mean']:.4f} ± {row[key]['sd']:.4f}"
                for label, key, _ in metrics
            )
        )
    lines.append("| (none: the full router) | " + " | ".join(full_cells) + " |")
    names = [v.name for v in VARIANTS if v.name != "full"]
    for name in names:
        cells = []
        for pool in pools:
            figures = found[pool]
            row, full = figures["variants"][name], figures["variants"]["full"]
            queries = figures["timings"][0]["test_queries"]
            parts = []
            for label, key, better in metrics:
                gap = row[key]["minus_full"]
                noise = max(full[key]["sd"], 1.0 / queries if key == "hit@1" else 0.0)
                text = f"{label} {gap:+.4f}"
                parts.append(f"**{text}**" if gap * better < -noise else text)
            cells.append(" · ".join(parts))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
