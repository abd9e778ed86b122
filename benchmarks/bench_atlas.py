"""The atlas's figures on real pools, next to the paper's: geometry, proxies, portfolios,
clusters, maps and capability search (fingerprinting: bench_identify.py), over the three
seeds' artifacts of `bench_accuracy.py` (same query split, three trainings).

    python benchmarks/bench_atlas.py --dataset mmlu-pro        # zeroeval, bfcl, routerbench

Needs the workspace and artifacts `bench_accuracy.py --dataset NAME` made (under
.bench/accuracy/NAME). Writes results/atlas-NAME.json and results/atlas-NAME-portfolio.png.
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

from benchmarks._common import REPO_ROOT, RESULTS, write_results

from locus.atlas.clusters import family_agreement, hierarchical, kmeans
from locus.atlas.plots import portfolio_png
from locus.atlas.pool_atlas import WorkspaceAtlas
from locus.atlas.portfolio import k_medoids, random_budget_portfolios, random_portfolios
from locus.atlas.projection import neighbours_kept, project
from locus.pipeline import load_workspace_locus
from locus.store import Store

PAPER = {
    "pearson_euclidean": 0.887,
    "spearman_euclidean": 0.876,
    "nearest_neighbour_agreement": 0.790,
    "proxy_retention": 0.85,
    "k_center_portfolio": "15 of 112 LLMs match the full pool",
    "capability_recall@10": 0.97,
}


def summarise(values: list[float]) -> dict[str, float]:
    finite = [v for v in values if v == v]
    return {
        "mean": statistics.fmean(finite) if finite else float("nan"),
        "sd": statistics.stdev(finite) if len(finite) > 1 else 0.0,
    }


def smallest_within(
    curve: list[tuple[int, float]], full: float, points: float = 0.005
) -> int | None:
    """The smallest k whose hit@1 is within `points` of the full pool's."""
    return next((k for k, hit in curve if hit >= full - points), None)


def twins(llm_ids: list[str]) -> list[tuple[str, str]]:
    """BFCL's same model behind two interfaces: `<name>-FC...` beside `<name>`."""
    known = set(llm_ids)
    pairs = []
    for llm in llm_ids:
        base = re.sub(r"-FC(-Any|-Auto)?$", "", llm)
        if base != llm and base in known:
            pairs.append((base, llm))
    return pairs


def pair_report(atlas: WorkspaceAtlas, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """How close each pair lies against the pool: its distance's percentile among all pairs,
    and whether each is the other's nearest neighbour."""
    d = atlas.distances()
    upper = d[np.triu_indices(len(d), k=1)]
    rows = []
    for a, b in pairs:
        i, j = atlas.index(a), atlas.index(b)
        order_i = np.argsort(d[i])[1:]
        rows.append(
            {
                "pair": [a, b],
                "distance": float(d[i, j]),
                "percentile": float(np.mean(upper < d[i, j])),
                "rank_from_first": int(np.flatnonzero(order_i == j)[0]) + 1,
                "agreement": float(atlas.agreement[0][i, j]),
            }
        )
    return {
        "pairs": rows,
        "median_percentile": float(np.median([r["percentile"] for r in rows])) if rows else None,
        "mutual_nearest": sum(r["rank_from_first"] == 1 for r in rows),
        "median_pair_distance": float(np.median(upper)),
    }


def one_seed(atlas: WorkspaceAtlas, seed: int, dataset: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    started = time.perf_counter()
    for metric in ("euclidean", "cosine"):
        out[f"geometry_{metric}"] = atlas.geometry(metric).as_dict()
    out["retention"] = atlas.retention().as_dict()
    full = atlas.full_pool_accuracy()
    n = len(atlas.llm_ids)
    top = min(n, 40)
    curves = {
        method: [
            (k, atlas.portfolio_accuracy(atlas.portfolio(k, method))) for k in range(1, top + 1)
        ]
        for method in ("k-center", "k-medoids")
    }
    curves["k-medoids (pure PAM)"] = [
        (k, atlas.portfolio_accuracy(k_medoids(atlas.distances(), k))) for k in range(1, top + 1)
    ]
    random_curve = [
        (k, *random_portfolios(atlas.test_proba, atlas.test_scores, k, draws=100, seed=seed))
        for k in range(1, top + 1)
    ]
    out["portfolio"] = {
        "full_pool": full,
        "curves": curves,
        "random": random_curve,
        "smallest_within_0.5": {
            **{m: smallest_within(c, full) for m, c in curves.items()},
            "random": smallest_within([(k, mean) for k, mean, _ in random_curve], full),
        },
    }
    if seed == 0:
        portfolio_png(
            curves, random_curve, full, RESULTS / f"atlas-{dataset}-portfolio.png",
            title=f"{dataset}: portfolios from embeddings alone (seed 0)",
        )  # fmt: skip
    families = atlas.families
    n_families = len(set(families))
    clusters = {
        "families": n_families,
        "hierarchical_silhouette": atlas.clusters(),
        "hierarchical_at_families": hierarchical(
            atlas.embeddings, k=min(n_families, n), metric="cosine"
        ),
        "kmeans_at_families": kmeans(atlas.embeddings, min(n_families, n), seed=seed),
    }
    out["clusters"] = {
        name: value if isinstance(value, int) else {
            "k": value.k, "ari": family_agreement(value.labels, families)
        }
        for name, value in clusters.items()
    }  # fmt: skip
    out["projection_kept"] = {
        m: neighbours_kept(atlas.embeddings, project(atlas.embeddings, m, seed=seed), k=10)
        for m in ("tsne", "pca")
    }
    out["capability_search"] = atlas.recall(n=8192, ks=(1, 5, 10), seed=seed)
    if dataset == "bfcl":
        out["twins"] = pair_report(atlas, twins(atlas.llm_ids))
    if "405B" in " ".join(atlas.llm_ids):
        trio = [llm for llm in atlas.llm_ids if "405B" in llm]
        out["llama_405b_pool_distances"] = pair_report(
            atlas, [(a, b) for i, a in enumerate(trio) for b in trio[i + 1 :]]
        )
    usd = atlas.usd_per_query()
    if np.isfinite(usd).sum() >= 2:
        budgets = sorted(
            {float(v) for v in np.quantile(usd[np.isfinite(usd)], [0.25, 0.5, 0.75, 1.0])}
        )
        budgets += [float(np.nansum(usd)) / 2]
        rows = []
        for budget in sorted(budgets):
            chosen = atlas.budget_portfolio(max_usd=budget)
            mean, sd, size = random_budget_portfolios(
                atlas.test_proba, atlas.test_scores, usd, budget, draws=100, seed=seed
            )
            rows.append(
                {
                    "max_usd": budget, "spent": chosen.spent,
                    "members": [atlas.llm_ids[i] for i in chosen.members],
                    "hit@1": atlas.portfolio_accuracy(chosen.members),
                    "random_same_budget": {"mean": mean, "sd": sd, "size": size},
                }
            )  # fmt: skip
        out["budget_usd"] = rows
    out["seconds"] = time.perf_counter() - started
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="mmlu-pro")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tag", default="all-MiniLM-L6-v2-onnx-int8")
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    args = parser.parse_args()
    folder = args.workspace / args.dataset
    if not (folder / "locus.db").exists():
        sys.exit(
            f"no workspace {folder}; run benchmarks/bench_accuracy.py --dataset {args.dataset}"
        )
    runs = []
    with Store.open(folder, create=False) as store:
        for seed in args.seeds:
            name = f"bench-{args.tag}-seed{seed}"
            model = load_workspace_locus(store, name)
            atlas = WorkspaceAtlas(store, name, embed=model.embed_many)
            run = one_seed(atlas, seed, args.dataset)
            runs.append(run)
            g = run["geometry_euclidean"]
            r = run["retention"]
            print(
                f"seed {seed}: Pearson {g['pearson']:.3f} Spearman {g['spearman']:.3f} Kendall "
                f"{g['kendall']:.3f}; 1-NN agreement {g['neighbour_agreement'][0]:.3f} (any pair "
                f"{g['mean_agreement']:.3f}); retention nearest {r['nearest_retention']:.3f} "
                f"next-best {r['next_best_retention']:.3f}; portfolio within 0.5 pt "
                f"{run['portfolio']['smallest_within_0.5']}; recall@10 "
                f"{run['capability_search']['recall']['10']:.3f} ({run['seconds']:.0f} s)",
                flush=True,
            )  # fmt: skip
    figures = {
        "dataset": args.dataset,
        "llms": len(atlas.llm_ids),
        "test_queries": len(atlas.test_scores),
        "seeds": args.seeds,
        "paper": PAPER,
        "summary": summarise_runs(runs),
        "per_seed": runs,
    }
    print(f"written {write_results(f'atlas-{args.dataset}', figures)}")


def summarise_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for metric in ("euclidean", "cosine"):
        for stat in ("pearson", "spearman", "kendall", "mean_agreement"):
            out[f"{stat}_{metric}"] = summarise([r[f"geometry_{metric}"][stat] for r in runs])
        curves = np.array([r[f"geometry_{metric}"]["neighbour_agreement"] for r in runs])
        out[f"neighbour_agreement_{metric}"] = curves.mean(axis=0).round(4).tolist()
    for key in ("hit", "nearest_retention", "next_best_retention"):
        out[f"retention_{key}"] = summarise([r["retention"][key] for r in runs])
    out["full_pool_hit@1"] = summarise([r["portfolio"]["full_pool"] for r in runs])
    out["smallest_within_0.5"] = [r["portfolio"]["smallest_within_0.5"] for r in runs]
    for k in ("1", "5", "10"):
        out[f"recall@{k}"] = summarise([r["capability_search"]["recall"][k] for r in runs])
    for name in ("hierarchical_silhouette", "hierarchical_at_families", "kmeans_at_families"):
        out[f"ari_{name}"] = summarise([r["clusters"][name]["ari"] for r in runs])
        out[f"k_{name}"] = [r["clusters"][name]["k"] for r in runs]
    for m in ("tsne", "pca"):
        out[f"kept_{m}"] = summarise([r["projection_kept"][m] for r in runs])
    return out


if __name__ == "__main__":
    main()
