"""Accuracy benchmark: LOCUS routing and correctness on real data, mean ± sd over seeds.

For each dataset: import into a fresh workspace (or reuse one), encode the queries with the
default text encoder (cached in the workspace), then for each training seed fit on the hash
split (seed 0: 80/10/10 of the queries) and evaluate on the test queries, next to the best
single LLM, the best LLM per task and the oracle on the same queries.

Run: `.venv/bin/python benchmarks/bench_accuracy.py --dataset mmlu-pro --seeds 0 1 2`
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, peak_memory_mb, require_shared_data, write_results

from locus.errors import LocusInputError
from locus.locus import Locus
from locus.nn import TrainingConfig
from locus.pipeline import (
    evaluate_workspace,
    fit_workspace,
    load_workspace_locus,
    workspace_table,
)
from locus.pipeline.workspace_artifacts import artifact_path
from locus.routing import Evidence, LocusRouter, StackedRouter, router_artifact
from locus.store import Store
from locus.store.ingest import import_path
from locus.text import get_text_encoder
from locus.text.cache import encode_missing

DATASETS = ("mmlu-pro", "zeroeval", "split2-model7", "bfcl", "routerbench")
DEFAULTS = TrainingConfig()


def prepare(dataset: str, workspace: Path, encoder: str | None = None) -> Store:
    data = require_shared_data()
    store = Store.open(workspace)
    if dataset == "mmlu-pro":
        import_path(store, "mmlu-pro", data / "mmlu_pro" / "eval_results")
    elif dataset == "zeroeval":
        folder = data / "zeroeval"
        import_path(store, "table", folder / "scores.csv.gz", queries=folder / "queries.jsonl.gz")
    elif dataset == "split2-model7":
        import_path(store, "scores-json", data / "routerdc" / "split2_model7")
    elif dataset == "bfcl":
        folder = data / "bfcl"
        import_path(store, "table", folder / "scores.csv.gz", queries=folder / "queries.jsonl.gz")
    elif dataset == "routerbench":
        import_path(store, "routerbench", data / "routerdc" / "routerbench_zs")
    else:
        sys.exit(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")
    report = encode_missing(store, get_text_encoder(encoder))
    print(f"encoded {report.encoded} queries ({report.cached} cached)", flush=True)
    return store


def knn_hit_at_1(store: Store, split_seed: int = 0) -> dict[str, float]:
    """A kNN vote over the same query vectors: each LLM's mean score on the k training queries
    nearest (cosine) to the query; k in {5, 10, 20, 50, 100} chosen on validation hit@1.

    The simplest strong baseline (issue 9 builds it as a router); here a reference figure.
    """
    import numpy as np

    from locus.metrics import routing_accuracy
    from locus.pipeline import workspace_table

    data = workspace_table(store, split_seed=split_seed)
    vectors, scores = data.vectors, data.table.scores
    train = data.rows("train")
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def vote(rows: np.ndarray, k: int) -> np.ndarray:
        out = np.empty((len(rows), scores.shape[1]), dtype=np.float32)
        for start in range(0, len(rows), 512):
            block = rows[start : start + 512]
            sims = unit[block] @ unit[train].T
            nearest = np.argpartition(-sims, k, axis=1)[:, :k]
            neighbour_scores = scores[train][nearest]  # (b, k, n_llms)
            seen = ~np.isnan(neighbour_scores)
            total = np.where(seen, neighbour_scores, 0.0).sum(axis=1)
            out[start : start + 512] = np.where(
                seen.any(axis=1), total / np.maximum(seen.sum(axis=1), 1), -1.0
            )
        return out

    val, test = data.rows("val"), data.rows("test")
    k = max((5, 10, 20, 50, 100), key=lambda k: routing_accuracy(vote(val, k), scores[val]))
    return {"k": k, "hit@1": routing_accuracy(vote(test, k), scores[test])}


def summarise(values: list[float]) -> dict[str, float]:
    values = [v for v in values if v == v]  # NaN (no fit timed: --evaluate-only, --restack) out
    if not values:
        return {"mean": float("nan"), "sd": float("nan")}
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def restack(store: Store, model: Locus, name: str) -> None:
    """Refit the artifact `name`'s router (kNN, stack, guard) on its LOCUS, as `locus fit`
    does after training, and write the artifact again with it (its costs kept)."""
    data = workspace_table(store, split_seed=model.manifest.split_seed)
    table = data.table.select_llms(list(model.llm_ids_))
    train, val = (Evidence.from_table(table, data.vectors, data.rows(s)) for s in ("train", "val"))
    router = StackedRouter.fit(LocusRouter(model), train, val)
    folder = artifact_path(store, name)
    kept = router_artifact.load(folder, LocusRouter(model))
    router_artifact.save(
        folder,
        router,
        cost_model=kept.cost_model,
        validation_vectors=kept.validation_vectors,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="mmlu-pro", choices=DATASETS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--anchors", type=int, default=1024)
    parser.add_argument("--max-steps", type=int, default=DEFAULTS.max_steps)
    parser.add_argument("--eval-every", type=int, default=DEFAULTS.eval_every)
    parser.add_argument("--patience", type=int, default=DEFAULTS.patience)
    parser.add_argument(
        "--encoder", default=None, help="Text encoder (default: locus's default); see locus encode"
    )
    parser.add_argument(
        "--evaluate-only", action="store_true", help="Reuse the artifacts of an earlier run."
    )
    parser.add_argument(
        "--restack",
        action="store_true",
        help="Reuse the artifacts of an earlier run, refit only the router on their LOCUS (kNN, "
        "stack, guard) with this version, then evaluate: a routing change before / after on "
        "the same networks.",
    )
    parser.add_argument(
        "--no-ensemble", action="store_true", help="LOCUS alone, not mixed with kNN (fit option)."
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="A TrainingConfig field for every seed, e.g. --set encoder_lr=4e-4 (repeatable).",
    )
    parser.add_argument("--tag", default="", help="Suffix of the artifact and result names.")
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    args = parser.parse_args()
    try:
        DEFAULTS.with_settings(args.overrides)
    except LocusInputError as error:
        sys.exit(f"--set: {error}")
    store = prepare(args.dataset, args.workspace / args.dataset, args.encoder)
    encoder = store.text_encoder or ""
    tag = encoder.replace("/", "-").replace("sentence-transformers-", "")
    if args.no_ensemble:
        tag += "-locus-alone"
    if args.tag:
        tag += f"-{args.tag}"
    knn = knn_hit_at_1(store)
    print(f"encoder {encoder}: kNN vote hit@1 {knn['hit@1']:.4f} (k={knn['k']})", flush=True)
    runs = []
    for seed in args.seeds:
        config = TrainingConfig(
            anchors=args.anchors, seed=seed, max_steps=args.max_steps,
            eval_every=args.eval_every, patience=args.patience,
        ).with_settings(args.overrides)  # fmt: skip
        name = f"bench-{tag}-seed{seed}"
        started = time.perf_counter()
        if args.evaluate_only or args.restack:
            model = load_workspace_locus(store, name)
            best_step, fit_seconds = model.best_step_, float("nan")
            if args.restack:
                restack(store, model, name)
        else:
            fit = fit_workspace(store, config, name=name, ensemble=not args.no_ensemble)
            best_step, fit_seconds = fit.best_step, time.perf_counter() - started
        result = evaluate_workspace(store, name=name).as_dict()
        result["fit_seconds"] = fit_seconds
        result["best_step"] = best_step
        runs.append(result)
        routing = result["routing"]
        moved = "-" if routing["moved"] is None else f"{routing['moved']:.3f}"
        print(
            f"seed {seed}: hit@1 {routing['hit@1']:.4f} (unguarded {routing['unguarded_hit@1']:.4f}"
            f", moved {moved}"
            f"; best single "
            f"{result['baselines']['best_single_llm']:.4f}, per task "
            f"{result['baselines']['best_llm_per_task']:.4f}, oracle "
            f"{result['baselines']['oracle']:.4f}) AUROC {result['correctness']['auroc']:.4f} "
            f"fit {result['fit_seconds']:.0f} s, best step {best_step}",
            flush=True,
        )
    figures = {
        "dataset": args.dataset,
        "encoder": encoder,
        "knn_vote": knn,
        "seeds": args.seeds,
        "anchors": args.anchors,
        "settings": args.overrides,
        "llms": runs[0]["llms"],
        "test_queries": runs[0]["queries"],
        "routing": {
            k: summarise([r["routing"][k] for r in runs])
            for k in ("hit@1", "hit@3", "hit@5", "unguarded_hit@1", "moved")
            if all(isinstance(r["routing"][k], float) for r in runs)
        },
        "guards": [r["routing"]["guard"] for r in runs],
        "correctness": {
            k: summarise([r["correctness"][k] for r in runs])
            for k in ("accuracy", "auroc", "brier", "ece")
        },
        "baselines": {
            k: runs[0]["baselines"][k]
            for k in ("best_single_llm", "best_single_llm_id", "best_llm_per_task", "oracle")
        },
        "fit_seconds": summarise([r["fit_seconds"] for r in runs]),
        "best_steps": [r["best_step"] for r in runs],
        "peak_memory_mb": round(peak_memory_mb()),
        "per_task_seed0": runs[0]["per_task"],
    }
    print(json.dumps({k: figures[k] for k in ("routing", "correctness", "baselines")}, indent=1))
    print(f"written {write_results(f'accuracy-{args.dataset}-{tag}', figures)}")
    store.close()


if __name__ == "__main__":
    main()
