"""The ablation table's newcomer rows: what each reading of an LLM joined since the fit buys.

As the newcomers suite (`locus benchmark newcomers`, `locus.benchmark.newcomers`): each
newcomer (the pool's best, its worst and `--random` others) is left out of the fit, then
onboarded from k probes (its embedding from them, its scores joined) and measured on the test
queries it was scored on: its P(correct)'s AUROC and log-loss, and the pool's hit@1 with it.
Here every variant of the router reads the same LOCUS and kNN part, so the differences are
paired: the router `locus fit` keeps ("full"); without the factor readings (the thin reading
refitted without them, "-factors"); without the thin reading at all (the stack reads the
joined LLM through its posterior votes, "-thin"); without the kNN votes among the stack's
parts, and without the factor readings ("-knn parts").

Run: `.venv/bin/python benchmarks/bench_ablation_newcomers.py --dataset bfcl`
(the workspaces are bench_accuracy.py's: `.bench/accuracy/<dataset>`).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, write_results
from bench_accuracy import DATASETS, prepare

from locus.benchmark.methods import Fold, fit_method
from locus.benchmark.newcomers import NEWCOMER_K, choose_newcomers, newcomer_probes, pool_hit
from locus.calibration import sigmoid
from locus.metrics import correctness_metrics
from locus.pipeline import workspace_table
from locus.routing import Evidence, KNNRouter, LocusRouter, StackedRouter
from locus.routing.guard import fit_default_guard
from locus.routing.stack import base_rate_shift, fit_stack
from locus.routing.stacked_fit import knn_task_votes, knn_votes

VARIANTS = ("full", "-factors", "-thin", "-knn parts")


def without_knn_parts(
    locus: LocusRouter, knn: KNNRouter, train: Evidence, val: Evidence
) -> StackedRouter:
    """The router `locus fit` keeps with no kNN vote among the stack's parts (its level
    still mixes LOCUS with the kNN vote at the router's k), and its thin reading refitted
    without the factor readings: what the router would be with the kNN parts gone."""
    ids = list(locus.llm_ids)
    truth = {s: np.asarray(e.scores, np.float64) for s, e in (("train", train), ("val", val))}
    logits = {s: locus.predict_logits(e.vectors) for s, e in (("train", train), ("val", val))}
    votes = {
        s: knn_votes(knn, e.vectors, ids, [knn.k_]) for s, e in (("train", train), ("val", val))
    }
    tasks = None
    if knn.has_task_vote:
        tasks = {
            s: knn_task_votes(knn, e.vectors, ids) for s, e in (("train", train), ("val", val))
        }
    stack = fit_stack(
        logits["val"], votes["val"], truth["val"], ks=(), mix_k=knn.k_,
        task_votes=None if tasks is None else tasks["val"],
    )  # fmt: skip
    both = np.concatenate(
        [
            stack.logits(logits[s], votes[s], None if tasks is None else tasks[s])
            for s in ("train", "val")
        ]
    )
    stack = replace(
        stack, shift=base_rate_shift(both, np.concatenate([truth["train"], truth["val"]]))
    )
    val_proba = sigmoid(
        stack.logits(logits["val"], votes["val"], None if tasks is None else tasks["val"])
    )
    guard = fit_default_guard(val_proba, truth["train"], truth["val"], ids)
    router = StackedRouter(locus, knn, stack, guard)
    router.fit_thin(train, val, factors=False)
    return router


def routers(fold: Fold, cache: Path) -> dict[str, StackedRouter]:
    locus, _ = fit_method("locus", fold, cache_dir=cache)
    knn, _ = fit_method("knn", fold, cache_dir=cache)
    assert isinstance(locus, LocusRouter) and isinstance(knn, KNNRouter)
    train, val = fold.evidence("train"), fold.evidence("val")
    full = StackedRouter.fit(locus, train, val, knn=copy.deepcopy(knn), factors=True)
    without_factors = StackedRouter.fit(locus, train, val, knn=copy.deepcopy(knn), factors=False)
    without_thin = copy.deepcopy(without_factors)
    without_thin.thin = without_thin.factors = None
    no_knn = without_knn_parts(locus, copy.deepcopy(knn), train, val)
    return {"full": full, "-factors": without_factors, "-thin": without_thin, "-knn parts": no_knn}


def measure(
    router: StackedRouter, vectors: np.ndarray, truth: np.ndarray, ids: list[str]
) -> dict[str, float]:
    hit, share, proba = pool_hit(router, vectors, truth, ids)
    quality = correctness_metrics(proba[:, -1:], truth[:, -1:])
    return {
        "hit@1": hit,
        "share": share,
        "auroc": quality["auroc"],
        "log_loss": quality["log_loss"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="bfcl", choices=DATASETS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--k", type=int, nargs="+", default=list(NEWCOMER_K))
    parser.add_argument("--random", type=int, default=5)
    parser.add_argument("--tag", default="")
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    args = parser.parse_args()
    store = prepare(args.dataset, args.workspace / args.dataset)
    data = workspace_table(store, split_seed=0)
    cache = args.workspace / "ablation-cache" / args.dataset
    ids = list(data.table.llm_ids)
    train, val, test = data.rows("train"), data.rows("val"), data.rows("test")
    hidden = data.table.scores.copy()
    hidden[test] = np.nan
    runs: list[dict[str, Any]] = []
    for newcomer in choose_newcomers(data, ("best", "worst"), args.random):
        column = ids.index(newcomer)
        known = [c for c in range(len(ids)) if c != column]
        pool_ids = [ids[c] for c in known]
        table = replace(data.table, scores=hidden).select_llms(pool_ids)
        fold = Fold(table, data.vectors, train, val, data.encoder, 0, f"without {newcomer}")
        bases = routers(fold, cache)
        rows = test[~np.isnan(data.table.scores[test, column])]
        truth = data.table.scores[rows][:, [*known, column]]
        vectors = data.vectors[rows]
        for k in args.k:
            for seed in args.seeds:
                probes = newcomer_probes(data, known, column, int(k), seed, "random")
                scores = data.table.scores[probes, column]
                tasks = [
                    "" if data.table.tasks[i] is None else str(data.table.tasks[i]) for i in probes
                ]
                run: dict[str, Any] = {"newcomer": newcomer, "k": int(k), "seed": int(seed)}
                for name, base in bases.items():
                    router = copy.deepcopy(base)
                    router.locus.model.add_llm(newcomer, data.vectors[probes], scores)  # type: ignore[attr-defined]
                    default = base.guard.default if base.guard is not None else None
                    paired = (
                        None if default is None else data.table.scores[probes, ids.index(default)]
                    )
                    router.join(
                        newcomer, data.vectors[probes], scores, tasks, default_scores=paired
                    )
                    run[name] = measure(router, vectors, truth, [*pool_ids, newcomer])
                runs.append(run)
                print(
                    f"{newcomer} k={k} seed={seed}: "
                    + "; ".join(
                        f"{v} AUROC {run[v]['auroc']:.4f} log-loss {run[v]['log_loss']:.4f} "
                        f"hit@1 {run[v]['hit@1']:.4f}"
                        for v in VARIANTS
                    ),
                    flush=True,
                )
    summary: dict[str, Any] = {}
    for k in args.k:
        mine = [r for r in runs if r["k"] == k]
        summary[str(k)] = {}
        for variant in VARIANTS:
            summary[str(k)][variant] = {}
            for metric in ("auroc", "log_loss", "hit@1", "share"):
                values = [r[variant][metric] for r in mine]
                gaps = [r[variant][metric] - r["full"][metric] for r in mine]
                summary[str(k)][variant][metric] = {
                    "mean": statistics.fmean(values),
                    "minus_full": statistics.fmean(gaps),
                    # the standard error of the paired gap over (newcomer, seed) runs
                    "minus_full_se": statistics.stdev(gaps) / len(gaps) ** 0.5,
                }
    print(f"\n{args.dataset}: variant minus full, mean (standard error over newcomer x seed runs)")
    for k, by_variant in summary.items():
        for variant, figures in by_variant.items():
            print(
                f"k={k:>4} {variant:>9}: "
                + "  ".join(
                    f"{m} {f['mean']:.4f} {f['minus_full']:+.4f}({f['minus_full_se']:.4f})"
                    for m, f in figures.items()
                )
            )
    figures = {
        "dataset": args.dataset,
        "seeds": args.seeds,
        "k": args.k,
        "summary": summary,
        "runs": runs,
    }
    print(f"written {write_results(f'ablation-newcomers-{args.dataset}{args.tag}', figures)}")
    store.close()


if __name__ == "__main__":
    main()


def markdown_table(results: Path, pools: tuple[str, ...] = ("bfcl", "split2-model7")) -> str:
    """The newcomer rows of the ablation table from `results/ablation-newcomers-<pool>.json`:
    per reading taken out and k, the change of the newcomer's AUROC and log-loss and of the
    pool's hit@1 with it, mean (its standard error over the newcomer x seed runs); bold where
    the cost is more than one standard error."""
    import json

    lines = [
        "| reading taken out | pool | " + " | ".join(f"k = {k}" for k in NEWCOMER_K) + " |",
        "|" + "---|" * (len(NEWCOMER_K) + 2),
    ]
    for pool in pools:
        path = results / f"ablation-newcomers-{pool}.json"
        if not path.exists():
            continue
        summary = json.loads(path.read_text())["figures"]["summary"]
        full = [
            f"AUROC {summary[str(k)]['full']['auroc']['mean']:.4f} · log-loss "
            f"{summary[str(k)]['full']['log_loss']['mean']:.4f} · pool "
            f"{summary[str(k)]['full']['hit@1']['mean']:.4f}"
            for k in NEWCOMER_K
        ]
        lines.append(f"| (none: the full reading) | {pool} | " + " | ".join(full) + " |")
        for variant in VARIANTS[1:]:
            cells = []
            for k in NEWCOMER_K:
                parts = []
                for label, metric, better in (
                    ("AUROC", "auroc", 1),
                    ("log-loss", "log_loss", -1),
                    ("pool", "hit@1", 1),
                ):
                    figure = summary[str(k)][variant][metric]
                    gap, se = figure["minus_full"], figure["minus_full_se"]
                    text = f"{label} {gap:+.4f} ({se:.4f})"
                    parts.append(f"**{text}**" if gap * better < -se else text)
                cells.append(" · ".join(parts))
            lines.append(f"| {variant} | {pool} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
