"""Other readings of a newcomer's P(correct) on the newcomers suite's fits: MF's onboarded
reading beside LOCUS's, and its level shrunk towards the pool's LLMs. Measured, not built.

On the newcomers suite's fits (`locus benchmark newcomers -w WS --random 5` first: the router
fitted without each newcomer and MF fitted on the same pool, cached in the workspace's
`benchmark-cache/newcomers`), each newcomer is onboarded from k random probes as the suite does
it (`StackedRouter.join`); MF onboards it from the same k scores (`MFRouter.add_llm`). Compared
on the newcomer's test queries: AUROC and log-loss of its P(correct), and the pool's guarded
hit@1 with the newcomer's column replaced, for

    locus           the router's P(correct) for it (as `locus onboard` leaves it)
    mf              MF's, with MF's own level
    mf@locus-level  MF's logits shifted to the router's mean P for it
    blend           the mean of the router's and the shifted MF logit, shifted to that mean P
    shrunk          the router's logits shifted by logit(a) - logit(m): m its probes' mean, a
                    that mean shrunk towards the pool's LLMs' mean on the same probes by
                    empirical Bayes (the binomial variance of m against the spread of the
                    pool's LLMs' means there, less their own binomial variance)

    python benchmarks/bench_newcomer_readings.py --dataset bfcl --k 16 --k 32 --k 128
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, write_results

from locus.benchmark._stats import log_loss, mean_sd
from locus.benchmark.methods import Fold, fit_method
from locus.benchmark.newcomers import newcomer_probes, suite_router
from locus.calibration import logit, sigmoid
from locus.metrics import correctness_metrics
from locus.pipeline import workspace_table
from locus.routing.decision import RouteRequest, choose
from locus.routing.thin import level_shift
from locus.store import Store


def shrunk_mean(scores: np.ndarray, pool: np.ndarray) -> float:
    """The newcomer's probes' mean `scores` (n,) shrunk towards the mean of the pool's LLMs' on
    the same probes (`pool` (n, m), NaN: not scored), by how far the pool's LLMs spread there."""
    n = len(scores)
    mine = float(np.clip(np.mean(scores), 0.5 / n, 1 - 0.5 / n))
    means = np.nanmean(pool, axis=0)
    means = means[~np.isnan(means)]
    noise = float(np.mean(means * (1 - means))) / n
    spread = max(float(np.var(means)) - noise, 1e-4)
    own = mine * (1 - mine) / n
    weight = own / (own + spread)
    return weight * float(np.mean(means)) + (1 - weight) * mine


def _readings(p: np.ndarray, q: np.ndarray, shift: float) -> dict[str, np.ndarray]:
    zq = logit(q, 1e-4)
    zq = zq + level_shift(zq, float(p.mean()))
    z = 0.5 * (logit(p, 1e-4) + zq)
    blend = sigmoid(z + level_shift(z, float(p.mean())))
    shrunk = sigmoid(logit(p, 1e-6) + shift)
    return {"locus": p, "mf": q, "mf@locus-level": sigmoid(zq), "blend": blend, "shrunk": shrunk}


READINGS = ("locus", "mf", "mf@locus-level", "blend", "shrunk")


def run(dataset: str, ks: list[int], seeds: list[int]) -> dict[str, Any]:
    workspace = REPO_ROOT / ".bench" / "accuracy" / dataset
    suite = json.loads(
        (REPO_ROOT / "benchmarks" / "results" / f"newcomers-{dataset}.json").read_text()
    )
    data = workspace_table(Store.open(workspace), split_seed=0)
    cache = workspace / "benchmark-cache" / "newcomers"
    ids = list(data.table.llm_ids)
    train, val, test = data.rows("train"), data.rows("val"), data.rows("test")
    hidden = data.table.scores.copy()
    hidden[test] = np.nan
    runs = []
    for newcomer in suite["newcomers"]:
        column = ids.index(newcomer)
        known = [c for c in range(len(ids)) if c != column]
        pool_ids = [ids[c] for c in known]
        fold = Fold(replace(data.table, scores=hidden).select_llms(pool_ids), data.vectors, train,
                    val, data.encoder, 0, f"without {newcomer}")  # fmt: skip
        base, _ = suite_router(fold, None, cache)
        mf = fit_method("mf", fold, cache_dir=cache)[0]
        rows = test[~np.isnan(data.table.scores[test, column])]
        truth = data.table.scores[rows][:, [*known, column]]
        default = base.guard.default if base.guard is not None else None
        for k in ks:
            for seed in seeds:
                probes = newcomer_probes(data, known, column, k, seed, "random")
                scores = data.table.scores[probes, column]
                tasks = ["" if data.table.tasks[i] is None else str(data.table.tasks[i])
                         for i in probes]  # fmt: skip
                router = copy.deepcopy(base)
                router.locus.model.add_llm(newcomer, data.vectors[probes], scores)  # type: ignore[attr-defined]
                paired = None if default is None else data.table.scores[probes, ids.index(default)]
                router.join(newcomer, data.vectors[probes], scores, tasks, default_scores=paired)
                order = [list(router.llm_ids).index(llm) for llm in [*pool_ids, newcomer]]
                full = np.asarray(router.predict_proba(data.vectors[rows]), np.float64)[:, order]
                onboarded = copy.deepcopy(mf)
                onboarded.add_llm(newcomer, data.vectors[probes], scores)  # type: ignore[attr-defined]
                q = np.asarray(onboarded.predict_proba(data.vectors[rows]), np.float64)[:, -1]
                guard = router.guard
                names = [*pool_ids, newcomer]
                bound = ((names.index(guard.default), guard.margin)
                         if guard is not None and guard.default in names else None)  # fmt: skip
                n = len(scores)
                toward = shrunk_mean(scores, data.table.scores[probes][:, known])
                mine = float(np.clip(np.mean(scores), 0.5 / n, 1 - 0.5 / n))
                shift = float(logit(np.array(toward)) - logit(np.array(mine)))
                for name, proba in _readings(full[:, -1], q, shift).items():
                    routed = full.copy()
                    routed[:, -1] = proba
                    choice = choose(routed, None, RouteRequest(), allowed=~np.isnan(truth),
                                    guard=bound)  # fmt: skip
                    kept = np.flatnonzero(choice >= 0)
                    runs.append({
                        "newcomer": newcomer, "k": k, "seed": seed, "reading": name,
                        "hit@1": float(np.mean(truth[kept, choice[kept]])),
                        "auroc": correctness_metrics(proba[:, None], truth[:, -1:])["auroc"],
                        "log_loss": log_loss(proba, truth[:, -1]),
                    })  # fmt: skip
        print(newcomer, flush=True)
    summary = {
        f"{name} k={k}": {m: mean_sd([r[m] for r in runs if r["reading"] == name and r["k"] == k])
                          for m in ("hit@1", "auroc", "log_loss")}
        for k in ks for name in READINGS
    }  # fmt: skip
    return {"dataset": dataset, "newcomers": suite["newcomers"], "k": ks, "seeds": seeds,
            "runs": runs, "summary": summary}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--k", type=int, action="append", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    result = run(args.dataset, args.k or [16, 32, 128], args.seeds)
    for key, value in result["summary"].items():
        print(f"{key:22s} hit@1 {value['hit@1']['mean']:.4f}  AUROC {value['auroc']['mean']:.3f}"
              f"  log-loss {value['log_loss']['mean']:.3f}")  # fmt: skip
    write_results(f"newcomer-readings-{args.dataset}", result)


if __name__ == "__main__":
    main()
