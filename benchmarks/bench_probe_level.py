"""How well k probes tell a newcomer's accuracy: the probes' own mean against the same mean
less how easy the probes were for the rest of the pool (a control variate).

Each LLM of a real pool in turn plays the newcomer: k of its training queries are drawn at
random (20 draws per LLM and k), and its accuracy on the test queries is estimated by

- the probes' mean score;
- the probes' mean less their mean easiness, a probe's easiness being the mean over the other
  LLMs scored on it of (their score there less their own mean score on the probe's task): easy
  probes make every LLM look better, and the other LLMs, scored on the same probes, say by how
  much;
- the mean of k probes chosen `balanced` (`locus.pipeline.probes`: stratified by the other
  LLMs' mean score on each query), and of k `stratified` by task: the probes drawn so that
  their luck matters less, the plain mean kept.

Mean absolute error over LLMs and draws. The workspace is bench_accuracy.py's
(`.bench/accuracy/<dataset>`, imported and encoded there).

    python benchmarks/bench_probe_level.py --dataset mmlu-pro --dataset zeroeval

Writes results/probe-level.json.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, report

from locus.pipeline import workspace_table
from locus.pipeline.probes import probe_order
from locus.store import Store


def errors(workspace: Path, ks: list[int], draws: int) -> dict[str, Any]:
    with Store.open(workspace, create=False) as store:
        data = workspace_table(store, split_seed=0)
    scores = data.table.scores.astype(np.float64)
    train, test = data.rows("train"), data.rows("test")
    tasks = np.asarray([t or "" for t in data.table.tasks], dtype=object)[train]
    rng = np.random.default_rng(0)
    names = ("mean", "adjusted", "balanced", "stratified")
    found: dict[int, dict[str, list[float]]] = {k: {name: [] for name in names} for k in ks}
    with warnings.catch_warnings():  # a query or task no other LLM was scored on: NaN, skipped
        warnings.simplefilter("ignore", RuntimeWarning)
        for x in range(scores.shape[1]):
            truth = np.nanmean(scores[test, x])
            rest = scores[:, [j for j in range(scores.shape[1]) if j != x]]
            others = rest[train]
            rates = np.full(others.shape, np.nan)
            for task in set(tasks):
                rates[tasks == task] = np.nanmean(others[tasks == task], axis=0)
            easiness = np.nan_to_num(np.nanmean(others - rates, axis=1))  # (n_train,)
            scored = np.flatnonzero(~np.isnan(scores[train, x]))
            for k in ks:
                if len(scored) < k:
                    continue
                for draw in range(draws):
                    probes = rng.choice(scored, k, replace=False)
                    mean = float(np.mean(scores[train[probes], x]))
                    found[k]["mean"].append(abs(mean - truth))
                    found[k]["adjusted"].append(abs(mean - easiness[probes].mean() - truth))
                    for strategy in ("balanced", "stratified"):
                        chosen = probe_order(
                            rest, data.vectors, train[scored], strategy,
                            seed=1_000 * x + draw, tasks=data.table.tasks,
                        )[:k]  # fmt: skip
                        found[k][strategy].append(abs(np.mean(scores[chosen, x]) - truth))
    return {
        str(k): {name: round(float(np.mean(v)), 4) for name, v in by.items()}
        for k, by in found.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", action="append")
    parser.add_argument("--k", type=int, action="append")
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    args = parser.parse_args()
    figures = {
        dataset: errors(args.workspace / dataset, args.k or [32, 128], args.draws)
        for dataset in args.dataset or ["mmlu-pro", "zeroeval", "split2-model7", "bfcl"]
    }
    report("probe-level", figures)


if __name__ == "__main__":
    main()
