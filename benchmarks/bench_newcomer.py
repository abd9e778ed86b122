"""A newcomer onboarded into a fitted pool: does the router act on its scores?

Leave-one-LLM-out on a real pool: the router is fitted without the LLM (`locus fit --exclude`),
then the LLM is onboarded from k of its scores on random training queries, as `locus onboard`
does: its embedding from those scores (one forward pass, no retraining) and its own votes joined
to the router (`StackedRouter.join`: kNN and task votes shrunk towards LOCUS by
`prior_strength`, and the guard's default re-chosen where its paired scores beat it). Reported
per newcomer, k and seed, on the test queries the newcomer was scored on:

- whole-pool hit@1 (guarded, as `locus route`) with the newcomer onboarded, beside the router
  without it, the newcomer alone, and the router onboarding it by LOCUS alone (no votes: what
  earlier versions did);
- the newcomer's share of the routed queries;
- its predicted accuracy (mean P(correct) over the test queries) against its measured one,
  beside the probes' own mean; AUROC of its P(correct) on the test queries.

    python benchmarks/bench_newcomer.py --dataset mmlu-pro --llm best --llm worst --k 32 128

`--baselines` also onboards the newcomer into MF and IRT fitted on the same pool (its per-LLM
vector fitted on the same k scores, everything else frozen: `add_llm`) and reports their
AUROC and log-loss on the same test queries beside the router's P(correct) for it.

`--probes S` chooses the k probes by `locus.pipeline.probes.probe_order` strategy S (from the
pool's scores without the newcomer, as `locus onboard` would) instead of a uniform sample.

The workspace is bench_accuracy.py's (`.bench/accuracy/<dataset>`, imported and encoded there).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, write_results

from locus.artifact import read_for_routing
from locus.locus import Locus
from locus.metrics import correctness_metrics
from locus.nn import TrainingConfig
from locus.pipeline import fit_workspace, workspace_table
from locus.pipeline.probes import first_scored, probe_order
from locus.pipeline.workspace_artifacts import artifact_path
from locus.pool import artifact_pools
from locus.routing import (
    Evidence,
    IRTRouter,
    LocusRouter,
    MFRouter,
    StackedRouter,
    router_artifact,
)
from locus.routing.decision import RouteRequest, choose
from locus.routing.factors import Factors
from locus.routing.locus_router import NumpyLocusRouter
from locus.routing.thin import ThinEvidence
from locus.store import Store

# a newcomer's reading beside the pool and the factor models it reads (`thin_reading`)
Reading = tuple[ThinEvidence | None, Factors | None]


def _router(folder: Path, prior_strength: float | None = None) -> StackedRouter:
    """The artifact's router over its fit-time pool, in memory (no workspace is written)."""
    routing = read_for_routing(folder)
    _, pool = artifact_pools(
        routing.llm_ids, routing.llm_embeddings, routing.evidence_counts, routing.manifest
    )
    router = router_artifact.load(folder, NumpyLocusRouter(routing.predictor, pool)).router
    if prior_strength is not None:
        router.prior_strength = prior_strength
    return router


def thin_reading(router: StackedRouter, data: Any, model: Locus) -> Reading:
    """The reading of a newcomer beside the pool (`locus.routing.thin`) fitted on `router`
    (a leave-one-out router fitted before `locus fit` kept one) as `locus fit` fits it, with
    the factor models it reads (`locus.routing.factors`): give both to a router with
    `read_beside` (the reading's weights without its factor models read those readings as 0)."""
    table = data.table
    router.fit_thin(
        Evidence.from_table(table, data.vectors, data.rows("train")),
        Evidence.from_table(table, data.vectors, data.rows("val")),
        LocusRouter(model).thin_logits,
        factors=True,
    )
    return router.thin, router.factors


def read_beside(router: StackedRouter, reading: Reading | None) -> StackedRouter:
    """`router` reading a newcomer with `reading` (`thin_reading`'s); None: as it is."""
    if reading is not None:
        router.thin, router.factors = reading
    return router


def loo_artifact(store: Store, newcomer: str) -> Path:
    """The folder of the router fitted without `newcomer` (fitted now when missing)."""
    name = "loo-" + "".join(c if c.isalnum() else "-" for c in newcomer)
    folder = artifact_path(store, name)
    if not (folder / "stacked.json").exists():
        fit_workspace(
            store, TrainingConfig(anchors=1024, seed=0), name=name, exclude_llms=[newcomer]
        )
    return folder


def _per_task_error(predicted: np.ndarray, truth: np.ndarray, tasks: list[str | None]) -> float:
    """Mean over the test queries' tasks of |mean predicted - measured accuracy| per task."""
    labels = np.array(["" if t is None else t for t in tasks])
    return float(
        np.mean([
            abs(predicted[labels == t].mean() - truth[labels == t].mean())
            for t in np.unique(labels)
        ])
    )  # fmt: skip


def _log_loss(proba: np.ndarray, truth: np.ndarray) -> float:
    p = np.clip(np.asarray(proba, np.float64), 1e-6, 1 - 1e-6)
    y = np.asarray(truth, np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _learned_baselines(data: Any, pool_ids: list[str]) -> dict[str, Any]:
    """MF and IRT fitted on the pool's training queries (validation for early stopping)."""
    table = data.table
    columns = [table.llm_index(llm) for llm in pool_ids]

    def evidence(split: str) -> Evidence:
        rows = data.rows(split)
        return Evidence(data.vectors[rows], table.scores[rows][:, columns], tuple(pool_ids))

    train, val = evidence("train"), evidence("val")
    return {name: kind().fit(train, val) for name, kind in (("mf", MFRouter), ("irt", IRTRouter))}


def _hit(
    router: StackedRouter, vectors: np.ndarray, truth: np.ndarray, ids: list[str]
) -> tuple[float, list[str]]:
    """hit@1 of the guarded routing as `locus evaluate` scores it: each query to the LLM of
    highest (guarded) P(correct) among those scored on it (sparse pools: ZeroEval is 82%
    observed)."""
    columns = [list(router.llm_ids).index(llm) for llm in ids]
    proba = np.asarray(router.predict_proba(vectors), np.float64)[:, columns]
    guard = router.guard
    bound = None
    if guard is not None and guard.default in ids:
        bound = (ids.index(guard.default), guard.margin)
    choice = choose(proba, None, RouteRequest(), allowed=~np.isnan(truth), guard=bound)
    kept = choice >= 0
    hits = truth[np.flatnonzero(kept), choice[kept]]
    return float(np.mean(hits)), [ids[c] if c >= 0 else "" for c in choice]


def draw_probes(
    data: Any, pool_ids: list[str], newcomer: str, k: int, seed: int, probes_by: str | None
) -> np.ndarray:
    """The rows of `newcomer`'s k probes among the training queries it was scored on: a
    seeded uniform draw (`probes_by` None), else the first k of a `locus.pipeline.probes`
    strategy's order read from the pool's scores, as `locus onboard` chooses them."""
    table, train = data.table, data.rows("train")
    x = table.llm_index(newcomer)
    if probes_by is None:
        scored = train[~np.isnan(table.scores[train, x])]
        return np.sort(np.random.default_rng([seed, k]).choice(scored, k, replace=False))
    pool_columns = [table.llm_index(llm) for llm in pool_ids]
    order = probe_order(
        table.scores[:, pool_columns], data.vectors, train, probes_by, seed=seed, tasks=table.tasks
    )
    return np.sort(first_scored(order, ~np.isnan(table.scores[:, x]), k))


def run(
    store: Store,
    newcomer: str,
    ks: list[int],
    seeds: list[int],
    strengths: list[float],
    probes_by: str | None = None,
    baselines: bool = False,
    with_thin: bool = False,
) -> list[dict[str, Any]]:
    folder = loo_artifact(store, newcomer)
    data = workspace_table(store, split_seed=0)
    table = data.table
    x = table.llm_index(newcomer)
    test = data.rows("test")
    base = _router(folder)
    pool_ids = list(base.llm_ids)
    ids = [*pool_ids, newcomer]
    columns = [table.llm_index(llm) for llm in ids]
    test = test[~np.isnan(table.scores[test, x])]  # the newcomer's own test queries
    truth = table.scores[test][:, columns]
    without, _ = _hit(base, data.vectors[test], truth[:, :-1], pool_ids)
    alone = float(np.mean(truth[:, -1]))
    best_pool = float(np.nanmax(np.nanmean(truth[:, :-1], axis=0)))
    model = Locus.load(folder, workspace=None)
    default = base.guard.default if base.guard is not None else None
    learned = _learned_baselines(data, pool_ids) if baselines else {}
    thin = thin_reading(base, data, model) if with_thin else None
    rows = []
    for k in ks:
        for seed in seeds:
            probes = draw_probes(data, pool_ids, newcomer, k, seed, probes_by)
            scores = table.scores[probes, x]
            vector = model.embed(data.vectors[probes], scores)
            tasks = [table.tasks[i] for i in probes]
            default_scores = (
                None if default is None else table.scores[probes, table.llm_index(default)]
            )
            # the probes' own per-task means (their overall mean for a task without a probe),
            # the baseline a predicted per-task accuracy must beat
            probe_tasks = np.array(["" if t is None else t for t in tasks])
            by_task = {t: float(scores[probe_tasks == t].mean()) for t in set(probe_tasks)}
            test_tasks = [table.tasks[i] for i in test]
            probe_guess = np.array(
                [by_task.get("" if t is None else t, float(scores.mean())) for t in test_tasks]
            )
            per_strength = {}
            variants: list[tuple[str, float | None, bool]] = [("locus-alone", None, False)]
            variants += [(f"m={strength:g}", strength, False) for strength in strengths]
            if thin is not None:  # read beside the pool (`locus.routing.thin`)
                variants.append(("thin", strengths[0], True))
            for key, strength, read_thin in variants:
                router = _router(folder, strength)
                router.thin = None
                if read_thin:
                    read_beside(router, thin)
                router.locus.pool.upsert(newcomer, vector, k, float(np.mean(scores)))  # type: ignore[attr-defined]
                if strength is not None:
                    router.join(
                        newcomer, data.vectors[probes], scores, tasks, default_scores=default_scores
                    )
                hit, chosen = _hit(router, data.vectors[test], truth, ids)
                proba = router.predict_proba(data.vectors[test])[
                    :, list(router.llm_ids).index(newcomer)
                ]
                metrics = correctness_metrics(proba[:, None], truth[:, -1:])
                per_strength[key] = {
                    "hit@1": hit,
                    "share": float(np.mean([c == newcomer for c in chosen])),
                    "predicted_accuracy": float(proba.mean()),
                    "auroc": metrics["auroc"],
                    "log_loss": _log_loss(proba, truth[:, -1]),
                    "per_task_abs_error": _per_task_error(proba, truth[:, -1], test_tasks),
                    "default": None if router.guard is None else router.guard.default,
                }
            onboarded = {}
            for label, fitted in learned.items():  # the same k scores, the rest frozen
                copied = copy.deepcopy(fitted)
                copied.add_llm(newcomer, data.vectors[probes], scores)
                proba = copied.predict_proba(data.vectors[test])[:, -1]
                metrics = correctness_metrics(proba[:, None], truth[:, -1:])
                onboarded[label] = {
                    "auroc": metrics["auroc"], "log_loss": _log_loss(proba, truth[:, -1]),
                    "predicted_accuracy": float(proba.mean()),
                    "per_task_abs_error": _per_task_error(proba, truth[:, -1], test_tasks),
                }  # fmt: skip
            rows.append({
                "newcomer": newcomer, "k": k, "seed": seed, "without": without, "alone": alone,
                "best_pool_llm": best_pool, "measured_accuracy": alone,
                "probe_mean": float(np.mean(scores)), "routers": per_strength,
                "probe_per_task_abs_error": _per_task_error(probe_guess, truth[:, -1], test_tasks),
                "baselines": onboarded,
            })  # fmt: skip
            line = ", ".join(
                f"{key} {v['hit@1']:.4f} ({v['share']:.0%}, pred {v['predicted_accuracy']:.3f}, "
                f"AUROC {v['auroc']:.3f}, log-loss {v['log_loss']:.3f})"
                for key, v in per_strength.items()
            ) + "".join(
                f", {key} AUROC {v['auroc']:.3f} log-loss {v['log_loss']:.3f} pred "
                f"{v['predicted_accuracy']:.3f}"
                for key, v in onboarded.items()
            )
            print(
                f"{newcomer} k={k} seed={seed}: without {without:.4f}, alone {alone:.4f}, probes "
                f"{np.mean(scores):.3f}; {line}",
                flush=True,
            )
    model.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="mmlu-pro")
    parser.add_argument("--llm", action="append", help="an LLM id, or best / worst")
    parser.add_argument("--k", type=int, action="append")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--strength", type=float, action="append")
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    parser.add_argument("--probes", default=None, help="a probe strategy; default: uniform")
    parser.add_argument("--baselines", action="store_true", help="MF and IRT onboarded too")
    parser.add_argument(
        "--thin", action="store_true",
        help="also the newcomer read beside the pool (locus.routing.thin), fitted on the "
        "leave-one-out router: the row 'thin'",
    )  # fmt: skip
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    store = Store.open(args.workspace / args.dataset)
    data = workspace_table(store, split_seed=0)
    train = data.rows("train")
    means = np.nanmean(data.table.scores[train], axis=0)
    named = {
        "best": data.table.llm_ids[int(means.argmax())],
        "worst": data.table.llm_ids[int(means.argmin())],
    }
    llms = [named.get(llm, llm) for llm in (args.llm or ["best"])]
    rows = []
    for llm in llms:
        rows += run(
            store, llm, args.k or [32, 128], args.seeds, args.strength or [32.0], args.probes,
            args.baselines, args.thin,
        )  # fmt: skip
    summary: dict[str, Any] = {}
    for llm in llms:
        for k in args.k or [32, 128]:
            mine = [r for r in rows if r["newcomer"] == llm and r["k"] == k]
            entry: dict[str, Any] = {"without": mine[0]["without"], "alone": mine[0]["alone"]}
            for key in mine[0]["routers"]:
                hits = [r["routers"][key]["hit@1"] for r in mine]
                errors = [
                    abs(r["routers"][key]["predicted_accuracy"] - r["measured_accuracy"])
                    for r in mine
                ]
                entry[key] = {
                    "hit@1": statistics.fmean(hits),
                    "sd": statistics.stdev(hits) if len(hits) > 1 else 0.0,
                    "share": statistics.fmean(r["routers"][key]["share"] for r in mine),
                    "accuracy_abs_error": statistics.fmean(errors),
                    "auroc": statistics.fmean(r["routers"][key]["auroc"] for r in mine),
                    "log_loss": statistics.fmean(r["routers"][key]["log_loss"] for r in mine),
                    "per_task_abs_error": statistics.fmean(
                        r["routers"][key]["per_task_abs_error"] for r in mine
                    ),
                }
            for key in mine[0]["baselines"]:
                entry[key] = {
                    "auroc": statistics.fmean(r["baselines"][key]["auroc"] for r in mine),
                    "log_loss": statistics.fmean(r["baselines"][key]["log_loss"] for r in mine),
                    "accuracy_abs_error": statistics.fmean(
                        abs(r["baselines"][key]["predicted_accuracy"] - r["measured_accuracy"])
                        for r in mine
                    ),
                    "per_task_abs_error": statistics.fmean(
                        r["baselines"][key]["per_task_abs_error"] for r in mine
                    ),
                }
            entry["probe_per_task_abs_error"] = statistics.fmean(
                r["probe_per_task_abs_error"] for r in mine
            )
            entry["probe_mean_abs_error"] = statistics.fmean(
                abs(r["probe_mean"] - r["measured_accuracy"]) for r in mine
            )
            summary[f"{llm} k={k}"] = entry
    for key, entry in summary.items():
        print(
            key,
            {
                k: v if not isinstance(v, dict) else {a: round(b, 4) for a, b in v.items()}
                for k, v in entry.items()
            },
        )
    written = write_results(
        f"newcomer-{args.dataset}{args.tag}", {"rows": rows, "summary": summary}
    )
    print(f"written {written}")
    store.close()


if __name__ == "__main__":
    main()
