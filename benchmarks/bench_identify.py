"""Identification (`locus identify`) on real pools: does an LLM's own held-out evidence find it?

Two protocols, 3 seeds each (one trained artifact per seed, from `bench_accuracy.py`):

- **New queries**: the pool's queries split in two halves; each LLM's reference from its scores
  on one half, its probe from k of its scores on the other. The embedding weight and the
  verdict threshold are chosen on one draw (seed 1000 + s) and measured on another (2000 + s).
  Methods: what `locus identify` does (per-task likelihood + weighted embedding distance), the
  embedding distance alone (the previous method), the per-task likelihood alone, and the
  baseline: the nearest per-task accuracy profile (root mean square difference), no embedding.
- **Shared queries**: the probe is k of the LLM's scored queries with a share `noise` of its
  scores flipped (a re-run that answers differently), compared with every known LLM's actual
  scores on those queries (the LLM itself included); threshold from pairs of distinct LLMs.

    python benchmarks/bench_identify.py --dataset zeroeval bfcl mmlu-pro split2-model7

Writes results/identify.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO_ROOT, write_results

from locus.atlas.agreement import agreements, pair_threshold
from locus.atlas.fingerprint import (
    FingerprintDraw,
    choose_threshold,
    choose_weight,
    fingerprint_report,
)
from locus.atlas.pool_atlas import WorkspaceAtlas
from locus.pipeline import load_workspace_locus
from locus.store import Store

KS = (64, 128, 256)
NOISE = (0.05, 0.1, 0.2)


def per_task_profile_identification(atlas: WorkspaceAtlas, draw: FingerprintDraw) -> float:
    """Baseline: each probe's per-task accuracy against each LLM's on the reference half
    (root mean square difference over the tasks the probe has), nearest wins."""
    scores, tasks = atlas.scores(), atlas.task_index()
    n_tasks = int(tasks.max()) + 1
    columns = [atlas.llm_ids.index(llm) for llm in draw.llm_ids]
    half = np.where(draw.first_half[:, None], scores[:, columns], np.nan)
    reference = np.full((len(columns), n_tasks), np.nan)
    for t in range(n_tasks):
        block = half[tasks == t]
        if (~np.isnan(block)).any():
            with np.errstate(invalid="ignore"):
                reference[:, t] = np.nanmean(block, axis=0)
    hits = 0
    for i, (rows, j) in enumerate(zip(draw.probe_rows, columns, strict=True)):
        profile = np.full(n_tasks, np.nan)
        for t in np.unique(tasks[rows]):
            profile[t] = scores[rows[tasks[rows] == t], j].mean()
        with np.errstate(invalid="ignore"):
            d = np.sqrt(np.nanmean((reference - profile[None, :]) ** 2, axis=1))
        hits += int(np.nanargmin(d) == i)
    return hits / len(columns)


def new_queries(atlas: WorkspaceAtlas, k: int, seed: int) -> dict[str, Any]:
    calibration = atlas.fingerprint_draw(k, seed=1000 + seed)
    evaluation = atlas.fingerprint_draw(k, seed=2000 + seed)
    weight = choose_weight(calibration)
    out: dict[str, Any] = {"llms": len(evaluation.llm_ids), "weight": weight}
    for name, w in (("locus", weight), ("embedding", float("inf")), ("tasks", 0.0)):
        threshold = choose_threshold(*calibration.same_and_different(w))
        report = fingerprint_report(evaluation, w, threshold)
        out[name] = {key: report[key] for key in ("identification", "true_match", "false_match")}
    out["per_task_profile"] = per_task_profile_identification(atlas, evaluation)
    return out


def shared_queries(atlas: WorkspaceAtlas, k: int, noise: float, seed: int) -> dict[str, Any]:
    scores = atlas.scores()
    rng = np.random.default_rng([seed, k, int(noise * 1000)])
    found, same, false, llms = [], [], [], 0
    for j in range(scores.shape[1]):
        rows = np.flatnonzero(~np.isnan(scores[:, j]))
        if len(rows) < k:
            continue
        llms += 1
        rows = rng.permutation(rows)[:k]
        probe = scores[rows, j].copy()
        flip = rng.random(k) < noise
        probe[flip] = 1.0 - probe[flip]
        pool = scores[rows]
        agree, _ = agreements(probe, pool)
        threshold = pair_threshold(pool)
        ranked = np.where(np.isnan(agree), -np.inf, agree)
        found.append(int(np.argmax(ranked)) == j)
        same.append(bool(agree[j] > threshold))
        others = np.delete(ranked, j)
        false.append(float(np.mean(others > threshold)))
    return {
        "llms": llms,
        "identification": float(np.mean(found)),
        "true_match": float(np.mean(same)),
        "false_match": float(np.mean(false)),
    }


def summary(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def run(dataset: str, tag: str, seeds: list[int], workspace: Path) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {}
    shared: dict[str, list[dict[str, Any]]] = {}
    with Store.open(workspace / dataset) as store:
        for seed in seeds:
            artifact = f"bench-{tag}-seed{seed}"
            model = load_workspace_locus(store, artifact)
            atlas = WorkspaceAtlas(store, artifact, embed=model.embed_many)
            started = time.perf_counter()
            for k in KS:
                try:
                    runs.setdefault(str(k), []).append(new_queries(atlas, k, seed))
                except Exception as error:  # a pool too small for k
                    print(f"{dataset} k={k}: skipped ({error})")
                for noise in NOISE:
                    shared.setdefault(f"{k}@{noise}", []).append(
                        shared_queries(atlas, k, noise, seed)
                    )
            print(f"{dataset} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    out: dict[str, Any] = {"new_queries": {}, "shared_queries": {}}
    for k, rows in runs.items():
        out["new_queries"][k] = {
            "llms": rows[0]["llms"],
            "weights": [r["weight"] for r in rows],
            "per_task_profile": summary([r["per_task_profile"] for r in rows]),
            **{
                method: {
                    key: summary([r[method][key] for r in rows])
                    for key in ("identification", "true_match", "false_match")
                }
                for method in ("locus", "embedding", "tasks")
            },
        }
    for key, rows in shared.items():
        out["shared_queries"][key] = {
            "llms": rows[0]["llms"],
            **{
                m: summary([r[m] for r in rows])
                for m in ("identification", "true_match", "false_match")
            },
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--dataset", nargs="+", default=["zeroeval", "bfcl", "mmlu-pro", "split2-model7"]
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tag", default="all-MiniLM-L6-v2-onnx-int8")
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    parser.add_argument("--out", default="identify")
    args = parser.parse_args()
    figures = {d: run(d, args.tag, args.seeds, args.workspace) for d in args.dataset}
    for dataset, result in figures.items():
        for k, row in result["new_queries"].items():
            cells = "  ".join(
                f"{m} {row[m]['identification']['mean']:.3f}±{row[m]['identification']['sd']:.3f}"
                for m in ("locus", "embedding", "tasks")
            )
            base = row["per_task_profile"]
            print(
                f"{dataset} new k={k}: {cells}  profile {base['mean']:.3f}±{base['sd']:.3f}  "
                f"locus true {row['locus']['true_match']['mean']:.3f} false "
                f"{row['locus']['false_match']['mean']:.3f} weights {row['weights']}"
            )
        for key, row in result["shared_queries"].items():
            print(
                f"{dataset} shared k@noise={key}: id {row['identification']['mean']:.3f}  "
                f"true {row['true_match']['mean']:.3f}  false {row['false_match']['mean']:.4f}"
            )
    print(f"written {write_results(args.out, figures)}")


if __name__ == "__main__":
    main()
