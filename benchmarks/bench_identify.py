"""Identification (`locus identify`) on real pools: does an LLM's own held-out evidence find it?

Two protocols, 3 seeds each (one trained artifact per seed, from `bench_accuracy.py`):

- **New queries**: the pool's queries split in two halves; each LLM's reference from its scores
  on one half, its probe from k of its scores on the other. The embedding weight and the
  verdict threshold are chosen on one draw (seed 1000 + s) and measured on another (2000 + s).
  (Small pools: calibration draws until they hold 100 probes, as `locus identify` does.)
  Methods: what `locus identify` does (per-task likelihood + weighted embedding distance), the
  embedding distance alone (the previous method), the per-task likelihood alone, and the
  baseline: the nearest per-task accuracy profile (root mean square difference), no embedding.
- **Shared queries**: the probe is k of the LLM's scored queries with a share `noise` of its
  scores flipped (a re-run that answers differently), compared with every known LLM's actual
  scores on those queries (the LLM itself included); threshold from pairs of distinct LLMs.
  And real re-runs: the same weights behind other names (ZeroEval's Llama-3.1-405B at three
  providers, BFCL's prompt and function-calling interfaces), each taken out of the pool in
  turn and identified by the others.

    python benchmarks/bench_identify.py --dataset zeroeval bfcl mmlu-pro split2-model7

Writes results/identify.json.
"""

from __future__ import annotations

import argparse
import re
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
    calibrate,
    calibration_draws,
    fingerprint_report,
)
from locus.atlas.pool_atlas import WorkspaceAtlas
from locus.pipeline import load_workspace_locus
from locus.store import Store

KS = (64, 128, 256)
NOISE = (0.05, 0.1, 0.2)
KEYS = ("identification", "true_match", "false_match", "false_verdict")


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
    draws = calibration_draws(lambda s: atlas.fingerprint_draw(k, seed=s), seed=1000 + seed * 100)
    evaluation = atlas.fingerprint_draw(k, seed=2000 + seed)
    weight, _ = calibrate(draws)
    out: dict[str, Any] = {"llms": len(evaluation.llm_ids), "weight": weight}
    for name, w in (("locus", weight), ("embedding", float("inf")), ("tasks", 0.0)):
        _, threshold = calibrate(draws, weights=(w,))
        report = fingerprint_report(evaluation, w, threshold)
        out[name] = {key: report[key] for key in KEYS}
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
        false.append(bool((np.delete(ranked, j) > threshold).any()))
    return {
        "llms": llms,
        "identification": float(np.mean(found)),
        "true_match": float(np.mean(same)),
        "false_verdict": float(np.mean(false)),
    }


def natural_groups(llm_ids: list[str]) -> list[list[str]]:
    """The same weights behind several names: ZeroEval's Llama-3.1-405B at three providers,
    BFCL's `<name>` beside `<name>-FC...` (the same model behind two interfaces)."""
    groups = [[llm for llm in llm_ids if "405B" in llm]]
    for base in llm_ids:
        fc = [llm for llm in llm_ids if re.fullmatch(re.escape(base) + r"-FC(-Any|-Auto)?", llm)]
        if fc:
            groups.append([base, *fc])
    return [g for g in groups if len(g) > 1]


def natural_reruns(atlas: WorkspaceAtlas, k: int, seed: int) -> dict[str, Any] | None:
    """Each member of a natural group as the unknown endpoint (its column taken out of the
    pool): is the known LLM agreeing most with it on k of its queries another member, and is
    it called the same?"""
    scores = atlas.scores()
    rng = np.random.default_rng([seed, k])
    found, called, wrong, probes = 0, 0, 0, 0
    for group in natural_groups(atlas.llm_ids):
        for llm in group:
            j = atlas.llm_ids.index(llm)
            rows = np.flatnonzero(~np.isnan(scores[:, j]))
            if len(rows) < k:
                continue
            rows = rng.permutation(rows)[:k]
            pool = np.delete(scores[rows], j, axis=1)
            others = [x for x in atlas.llm_ids if x != llm]
            agree, _ = agreements(scores[rows, j], pool)
            threshold = pair_threshold(pool)
            best = int(np.nanargmax(np.where(np.isnan(agree), -np.inf, agree)))
            probes += 1
            found += others[best] in group
            if agree[best] > threshold:
                called += others[best] in group
                wrong += others[best] not in group
    if not probes:
        return None
    return {"probes": probes, "found": found, "called_same": called, "called_wrong": wrong}


def summary(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def run(dataset: str, tag: str, seeds: list[int], workspace: Path) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {}
    shared: dict[str, list[dict[str, Any]]] = {}
    natural: dict[str, list[dict[str, Any]]] = {}
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
                rerun = natural_reruns(atlas, k, seed)
                if rerun is not None:
                    natural.setdefault(str(k), []).append(rerun)
                for noise in NOISE:
                    shared.setdefault(f"{k}@{noise}", []).append(
                        shared_queries(atlas, k, noise, seed)
                    )
            print(f"{dataset} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    out: dict[str, Any] = {"new_queries": {}, "shared_queries": {}, "natural_reruns": natural}
    for size, rows in runs.items():
        out["new_queries"][size] = {
            "llms": rows[0]["llms"],
            "weights": [r["weight"] for r in rows],
            "per_task_profile": summary([r["per_task_profile"] for r in rows]),
            **{
                method: {key: summary([r[method][key] for r in rows]) for key in KEYS}
                for method in ("locus", "embedding", "tasks")
            },
        }
    for key, rows in shared.items():
        out["shared_queries"][key] = {
            "llms": rows[0]["llms"],
            **{
                m: summary([r[m] for r in rows])
                for m in ("identification", "true_match", "false_verdict")
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
                f"{row['locus']['false_match']['mean']:.3f} verdict wrong "
                f"{row['locus']['false_verdict']['mean']:.3f} weights {row['weights']}"
            )
        for key, row in result["shared_queries"].items():
            print(
                f"{dataset} shared k@noise={key}: id {row['identification']['mean']:.3f}  "
                f"true {row['true_match']['mean']:.3f}  "
                f"wrong verdict {row['false_verdict']['mean']:.4f}"
            )
        for size, reruns in result["natural_reruns"].items():
            print(f"{dataset} natural re-runs k={size}: {reruns}")
    print(f"written {write_results(args.out, figures)}")


if __name__ == "__main__":
    main()
