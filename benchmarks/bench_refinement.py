"""Refinement benchmark: does an LLM embedding converge as its evidence grows?

For each training seed: fit LOCUS on the hash split (anchors per LLM as in `locus fit`), then

1. re-embed every LLM from all its non-test scores (what `locus embed --all` does) and compare
   test hit@1 / AUROC with the fit-time embeddings (from the anchors), for the encoder reading
   every score in one set ("unbounded", as before this benchmark) and reading them in chunks of
   at most the training evidence size, averaged ("bounded", the default);
2. convergence: each LLM embedded from n random non-test scores, n = 16 ... all: cosine distance
   to its all-scores embedding, and test hit@1 with every LLM embedded from n scores.

Figures: mean ± sd over seeds (and over `--draws` random draws of the n scores). Writes
`benchmarks/results/refinement-<dataset>.json` and a PNG of the curves.

Run: `.venv/bin/python benchmarks/bench_refinement.py --dataset mmlu-pro --seeds 0 1 2`
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, RESULTS, write_results

from locus import metrics
from locus.locus import Locus
from locus.nn import TrainingConfig, embed_many
from locus.palette import method_colour

SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class Arrays:
    scores: np.ndarray  # (n_queries, n_llms)
    vectors: np.ndarray  # (n_queries, dq)
    splits: np.ndarray  # (n_queries,)
    llm_ids: tuple[str, ...]
    encoder: str

    def rows(self, split: str) -> np.ndarray:
        return np.flatnonzero(self.splits == split)


def load_arrays(dataset: str, workspace: Path) -> Arrays:
    from bench_accuracy import prepare

    from locus.pipeline import workspace_table

    store = prepare(dataset, workspace)
    data = workspace_table(store)
    store.close()
    return Arrays(data.table.scores, data.vectors, data.splits, data.table.llm_ids, data.encoder)


def evaluate(model: Locus, data: Arrays, z: np.ndarray) -> dict[str, float]:
    """Test hit@1 and AUROC with LLM embeddings `z` (n_llms, d)."""
    model.set_embeddings(data.llm_ids, z, [0] * len(data.llm_ids))
    rows = data.rows("test")
    proba = model.predict_proba(data.vectors[rows])
    truth = data.scores[rows]
    correctness = metrics.correctness_metrics(proba, truth)
    return {"hit@1": metrics.routing_accuracy(proba, truth), "auroc": correctness["auroc"]}


def embed_from(
    model: Locus, data: Arrays, rows_per_llm: list[np.ndarray], bound: int | None
) -> np.ndarray:
    evidence = [
        (data.vectors[rows], data.scores[rows, llm]) for llm, rows in enumerate(rows_per_llm)
    ]
    return embed_many(model.encoder_, evidence, max_evidence=bound)


def cosine_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise 1 - cos(a_i, b_i)."""
    dots = np.sum(a * b, axis=1)
    return 1.0 - dots / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def run_seed(data: Arrays, config: TrainingConfig, draws: int) -> dict[str, Any]:
    started = time.perf_counter()
    model = Locus(config)
    model.fit(
        _table(data), data.vectors, data.rows("train"), data.rows("val"),
        text_encoder_name=data.encoder,
    )  # fmt: skip
    fit_seconds = time.perf_counter() - started
    fit_z = model.llm_embeddings_.copy()
    allowed = data.splits != "test"
    usable = [
        np.flatnonzero(~np.isnan(data.scores[:, llm]) & allowed) for llm in range(len(data.llm_ids))
    ]
    result: dict[str, Any] = {"fit_seconds": fit_seconds, "best_step": model.best_step_}
    result["fit_time"] = evaluate(model, data, fit_z)
    full = {}
    for label, bound in (("unbounded", None), ("bounded", model.evidence_bound_)):
        z = embed_from(model, data, usable, bound)
        full[label] = z
        result[f"all_scores_{label}"] = {
            **evaluate(model, data, z),
            "moved_from_fit_euclidean": float(np.linalg.norm(z - fit_z, axis=1).mean()),
            "moved_from_fit_cosine": float(cosine_distance(z, fit_z).mean()),
        }
    rng = np.random.default_rng(1234)
    curve: dict[str, dict[str, list[float]]] = {}
    largest = max(len(u) for u in usable)
    for n in [s for s in SIZES if s < largest] + ["all"]:  # type: ignore[operator]
        key = str(n)
        curve[key] = {f"{label}_{m}": [] for label in full for m in ("cosine", "hit@1")}
        for _ in range(draws if n != "all" else 1):
            picked = [
                u if n == "all" else rng.choice(u, size=min(int(n), len(u)), replace=False)
                for u in usable
            ]
            for label, bound in (("unbounded", None), ("bounded", model.evidence_bound_)):
                z = embed_from(model, data, picked, bound)
                curve[key][f"{label}_cosine"].append(float(cosine_distance(z, full[label]).mean()))
                curve[key][f"{label}_hit@1"].append(evaluate(model, data, z)["hit@1"])
    result["convergence"] = {
        n: {k: float(np.mean(v)) for k, v in c.items()} for n, c in curve.items()
    }
    return result


def _table(data: Arrays) -> Any:
    from locus.data.table import ScoreTable

    n = len(data.scores)
    return ScoreTable(
        scores=data.scores,
        llm_ids=data.llm_ids,
        query_ids=tuple(str(i) for i in range(n)),
        text_hashes=tuple(f"{i:064x}" for i in range(n)),
    )


def summarise(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def plot(figures: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = figures["convergence"]
    sizes = [n for n in curve if n != "all"]
    x = [int(n) for n in sizes]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.5, 4.4))
    # what locus does: evidence read in chunks of at most the training size, averaged
    for axis, metric in ((left, "cosine"), (right, "hit@1")):
        means = [curve[n][f"bounded_{metric}"]["mean"] for n in sizes]
        sds = [curve[n][f"bounded_{metric}"]["sd"] for n in sizes]
        axis.errorbar(x, means, yerr=sds, fmt="-o", capsize=3, linewidth=2,
                      color=method_colour("locus"),
                      label="evidence read in chunks (as locus does), mean ± sd")  # fmt: skip
        other = [curve[n][f"unbounded_{metric}"]["mean"] for n in sizes]
        gap = max(abs(a - b) for a, b in zip(means, other, strict=True))
        axis.plot(x, other, ":", color="grey",
                  label=f"read all at once (differs by at most {gap:.4f})")  # fmt: skip
    right.axhline(
        figures["fit_time"]["hit@1"]["mean"], color="grey", ls="--",
        label="fit time (from the anchors)",
    )  # fmt: skip
    right.axhline(
        figures["all_scores_bounded"]["hit@1"]["mean"], color="black", ls="-.",
        label="from all non-test scores",
    )  # fmt: skip
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("scores per LLM (n)")
        axis.legend(fontsize=8)
    left.set_yscale("log")
    left.set_ylabel("cosine distance to all-scores embedding")
    right.set_ylabel("test hit@1, every LLM from n scores")
    fig.suptitle(
        f"{figures['dataset']}: embedding convergence (training evidence drawn from "
        f"{figures['evidence_from']} queries; {len(figures['seeds'])} seeds)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="mmlu-pro")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--anchors", type=int, default=1024)
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument(
        "--evidence-from", default="training", choices=("training", "anchors"),
        help="TrainingConfig.evidence_from: where training draws evidence from",
    )  # fmt: skip
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    parser.add_argument(
        "--plot-only", action="store_true", help="Redraw the PNG from the results JSON."
    )
    args = parser.parse_args()
    name = f"refinement-{args.dataset}" + ("" if args.evidence_from == "training" else "-anchors")
    if args.plot_only:
        figures = json.loads((RESULTS / f"{name}.json").read_text())["figures"]
        plot(figures, RESULTS / f"{name}.png")
        return
    data = load_arrays(args.dataset, args.workspace / args.dataset)
    anchors = min(args.anchors, int((~np.isnan(data.scores[data.rows("train")])).sum(0).max()))
    runs = []
    for seed in args.seeds:
        config = TrainingConfig(
            anchors=anchors, seed=seed, max_steps=3000, eval_every=50, patience=6,
            evidence_from=args.evidence_from,
        )  # fmt: skip
        runs.append(run_seed(data, config, args.draws))
        r = runs[-1]
        print(
            f"seed {seed}: fit {r['fit_seconds']:.0f} s; test hit@1 fit-time "
            f"{r['fit_time']['hit@1']:.4f}, all scores bounded "
            f"{r['all_scores_bounded']['hit@1']:.4f}, unbounded "
            f"{r['all_scores_unbounded']['hit@1']:.4f}; AUROC "
            f"{r['fit_time']['auroc']:.4f} / {r['all_scores_bounded']['auroc']:.4f} / "
            f"{r['all_scores_unbounded']['auroc']:.4f}",
            flush=True,
        )
    figures: dict[str, Any] = {
        "dataset": args.dataset, "seeds": args.seeds, "anchors": anchors,
        "evidence_from": args.evidence_from,
    }  # fmt: skip
    for key in ("fit_time", "all_scores_bounded", "all_scores_unbounded"):
        figures[key] = {m: summarise([r[key][m] for r in runs]) for m in runs[0][key]}
    figures["convergence"] = {
        n: {m: summarise([r["convergence"][n][m] for r in runs]) for m in row}
        for n, row in runs[0]["convergence"].items()
    }
    figures["fit_seconds"] = summarise([r["fit_seconds"] for r in runs])
    print(f"written {write_results(name, figures)}")
    png = RESULTS / f"{name}.png"
    plot(figures, png)
    print(f"written {png}")


if __name__ == "__main__":
    main()
