"""Why an onboarded LLM routes badly: its P(correct) given what it cannot know.

Leave-one-LLM-out as `bench_newcomer.py` (its leave-one-out fits, its probes: k random training
queries per seed); the newcomer onboarded and joined as `locus onboard` does, the reading of
`locus.routing.thin` switched off (the stack reads it as a fitted LLM). Then only its column
of P(correct) is replaced, every fitted LLM's left as it is, and the pool routed (guarded, as
`locus route`) over its test queries; reported per newcomer and seed is hit@1 less the router
without it:

    as is        its P(correct) as joined
    true level   its logits shifted so that their mean over the test queries is its measured
                 accuracy there (an oracle: the level known)
    recalibrated its logits recalibrated on the test queries themselves (intercept and slope:
                 an oracle)
    beside pool  a logistic regression fitted on the test queries of its correctness on its
                 logit and the fitted LLMs' mean and best stacked logit (an oracle: the
                 conditional P(correct) given the pool's predictions)
    lcb z        as is, but it must beat the others by z times its uncertainty (`spread`)

    python benchmarks/bench_newcomer_oracles.py --dataset split2-model7 --llm A --llm B ...
    python benchmarks/bench_newcomer_oracles.py --dataset mmlu-pro --llm best

Writes results/newcomer-oracles-<dataset><tag>.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, write_results
from bench_newcomer import _router, loo_artifact
from scipy.optimize import brentq
from sklearn.linear_model import LogisticRegression

from locus.calibration import sigmoid
from locus.locus import Locus
from locus.pipeline import workspace_table
from locus.routing.decision import RouteRequest, choose
from locus.store import Store

LCB_Z = (0.5, 1.0, 2.0)


def _hit(
    proba: np.ndarray, truth: np.ndarray, guard: tuple[int, float] | None
) -> tuple[float, float]:
    """(hit@1, the last column's share) of guarded routing over the scored cells."""
    choice = choose(proba, None, RouteRequest(), allowed=~np.isnan(truth), guard=guard)
    rows = np.arange(len(truth))
    return float(np.nanmean(truth[rows, choice])), float(np.mean(choice == truth.shape[1] - 1))


def _shift_to(logits: np.ndarray, target: float) -> float:
    """The shift a with the mean of sigmoid(logits + a) at `target`."""
    return float(brentq(lambda a: float(sigmoid(logits + a).mean()) - target, -20, 20))


def _fitted(features: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The logits of a logistic regression of scores `y` on `features`, fitted on them (a
    score s counts as s successes and 1 - s failures)."""
    both = np.vstack([features, features])
    labels = np.concatenate([np.ones(len(y)), np.zeros(len(y))])
    fit = LogisticRegression(C=1e6, max_iter=1000).fit(
        both, labels, sample_weight=np.concatenate([y, 1 - y])
    )
    return np.asarray(fit.decision_function(features))


def run(store: Store, newcomer: str, k: int, seeds: list[int]) -> list[dict[str, Any]]:
    folder = loo_artifact(store, newcomer)
    data = workspace_table(store, split_seed=0)
    table = data.table
    x = table.llm_index(newcomer)
    test = data.rows("test")
    test = test[~np.isnan(table.scores[test, x])]
    train = data.rows("train")
    scored = train[~np.isnan(table.scores[train, x])]
    model = Locus.load(folder, workspace=None)
    rows = []
    for seed in seeds:
        probes = np.sort(np.random.default_rng([seed, k]).choice(scored, k, replace=False))
        scores = table.scores[probes, x]
        router = _router(folder)
        router.thin = None
        default = router.guard
        router.locus.pool.upsert(  # type: ignore[attr-defined]
            newcomer, model.embed(data.vectors[probes], scores), k, float(np.mean(scores))
        )
        held = None if default is None else table.scores[probes, table.llm_index(default.default)]
        router.join(newcomer, data.vectors[probes], scores, [table.tasks[i] for i in probes],
                    default_scores=held)  # fmt: skip
        ids = [llm for llm in router.llm_ids if llm != newcomer] + [newcomer]
        order = [list(router.llm_ids).index(llm) for llm in ids]
        truth = table.scores[test][:, [table.llm_index(llm) for llm in ids]].astype(np.float64)
        logits = np.asarray(router.predict_logits(data.vectors[test]), np.float64)[:, order]
        guard = None
        if router.guard is not None:
            guard = (ids.index(router.guard.default), router.guard.margin)
        without, _ = _hit(sigmoid(logits[:, :-1]), truth[:, :-1], guard)
        own, y = logits[:, -1], truth[:, -1]
        level = _shift_to(own, float(y.mean()))
        pool = logits[:, :-1]
        readings = np.column_stack([own, pool.mean(axis=1), pool.max(axis=1)])

        variants = {
            "as is": own,
            "true level": own + level,
            "recalibrated": _fitted(own[:, None], y),
            "beside pool": _fitted(readings, y),
        }
        counts = np.asarray(router.evidence_counts(), np.float64)[order]
        row: dict[str, Any] = {"newcomer": newcomer, "k": k, "seed": seed, "without": without}
        for name, column in variants.items():
            proba = sigmoid(np.column_stack([pool, column]))
            hit, share = _hit(proba, truth, guard)
            row[name] = {"gain": hit - without, "share": share}
        for z in LCB_Z:
            proba = sigmoid(logits)
            bound = proba.copy()
            bound[:, -1] -= z * np.sqrt(proba[:, -1] * (1 - proba[:, -1]) / (counts[-1] + 1))
            choice = choose(bound, None, RouteRequest(), allowed=~np.isnan(truth), guard=guard)
            hit = float(np.nanmean(truth[np.arange(len(truth)), choice]))
            row[f"lcb {z:g}"] = {
                "gain": hit - without,
                "share": float(np.mean(choice == len(ids) - 1)),
            }
        rows.append(row)
        print(
            f"{newcomer} seed {seed}: without {without:.4f}; "
            + ", ".join(
                f"{key} {row[key]['gain']:+.4f} ({row[key]['share']:.0%})"
                for key in row
                if isinstance(row[key], dict)
            ),
            flush=True,
        )
    model.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="split2-model7")
    parser.add_argument("--llm", action="append", help="an LLM id, or best")
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    store = Store.open(args.workspace / args.dataset)
    data = workspace_table(store, split_seed=0)
    means = np.nanmean(data.table.scores[data.rows("train")], axis=0)
    best = data.table.llm_ids[int(means.argmax())]
    rows = []
    for llm in args.llm or ["best"]:
        rows += run(store, best if llm == "best" else llm, args.k, args.seeds)
    keys = [key for key in rows[0] if isinstance(rows[0][key], dict)]
    summary = {
        key: {
            "gain": statistics.fmean(r[key]["gain"] for r in rows),
            "sd": statistics.stdev(r[key]["gain"] for r in rows) if len(rows) > 1 else 0.0,
            "share": statistics.fmean(r[key]["share"] for r in rows),
        }
        for key in keys
    }
    for key, value in summary.items():
        print(
            f"{key:12s} gain {value['gain']:+.4f} ± {value['sd']:.4f}, share {value['share']:.1%}"
        )
    print(
        "written",
        write_results(
            f"newcomer-oracles-{args.dataset}{args.tag}", {"rows": rows, "summary": summary}
        ),
    )
    store.close()


if __name__ == "__main__":
    main()
