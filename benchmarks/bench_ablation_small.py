"""The ablation table's small-pool rows: what each part of the small-pool path buys, out of fold.

Below `CROSS_FIT_CELLS` scored validation cells, `locus fit` chooses the stack and the guard on
out-of-fold kNN votes (`locus.routing.cross_fit`). Its parts, each taken out in turn: the
out-of-fold fit itself (the stack fitted on the validation split, as on a large pool), LOCUS's
share (LOCUS given no say), the pull chosen by cross-validation (the weakest pull instead), the
level's choice between the task vote and the kNN vote (the kNN vote always), the best vote's
part without tasks (the level at the k that routes best, the pull towards the regional vote),
the shift, the guard. Beside them, the plain vote of each query's 20 nearest (one pseudo-query
at the LLM's mean; the vote a small pool's P(correct) is held to). The weights of a query whose
task is named were measured by the run that decided them (`results/ablation-small.json`, at
`7c8b18b`) and went.

Pools, as a user brings them (one CSV per LLM, `locus import`, the default text encoder):
the planted 4 LLMs x 200 MMLU-Pro questions of `bench_small_pool.py` (with its category
column, and without it), 5 real LLMs' own MMLU-Pro answers on 400 questions of
`bench_small_pool_real.py`, and `bench_sparse_log.py`'s planted log (600 prompts, each answered
by one of 4 LLMs). Every query is routed once, as `locus evaluate --folds 5` does: each fold
trains LOCUS once (`locus fit`'s recipe), then every variant fits its stack and guard on the
same LOCUS and the same folds, so the differences are paired. Figures over the held-out
queries: hit@1 (the drawn scores), on a planted pool the expected hit@1 of the choice among
every LLM under the planted rates, log-loss, AUROC and ECE of P(correct) on the scored cells,
and the same told each query's task.

    python benchmarks/bench_ablation_small.py --seeds 0 1 2 [--pools log --tag=-log]

Writes results/ablation-small<tag>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import csv_pool_store, report, require_shared_data
from _planted_log import RATES, make_log, questions
from bench_small_pool import SKILL, draw, nearest_vote
from bench_small_pool_real import LLMS, answers

from locus.data.splits import kfold_splits
from locus.locus import Locus
from locus.metrics import correctness_metrics
from locus.nn.config import TrainingConfig
from locus.pipeline import workspace_table
from locus.pipeline.evaluate import Routed
from locus.routing import Evidence, LocusRouter, cross_fit
from locus.routing.stack import STACK_KS
from locus.routing.stacked import StackedRouter

FOLDS = 5


def _wrapped_stack(after: Callable[[Any], Any]) -> Any:
    """A patch of `cross_fit.fit_cross_fitted_stack` whose stack `after` maps."""
    original = cross_fit.fit_cross_fitted_stack

    def fitted(*args: Any, **kwargs: Any) -> Any:
        return after(original(*args, **kwargs))

    return mock.patch.object(cross_fit, "fit_cross_fitted_stack", fitted)


def _variant(name: str) -> tuple[dict[str, Any], contextlib.AbstractContextManager[Any]]:
    """(`StackedRouter.fit`'s keyword arguments, the patches) of the variant `name`."""
    same = contextlib.nullcontext()
    if name == "full":
        return {}, same
    if name == "-out-of-fold":  # the stack on the validation split, as on a large pool
        return {"cross_fit_below": 0}, same
    if name == "-locus share":
        return {"use_locus": False}, same
    if name == "weakest pull":
        return {}, mock.patch.object(cross_fit, "PENALTIES", (cross_fit.PENALTIES[0],))
    if name == "level=knn":
        return {}, mock.patch.object(cross_fit, "choose_level", lambda *_: "knn")
    if name == "-best vote":  # the level at the routing k, pulled towards the regional vote
        return {}, mock.patch.object(
            cross_fit, "_toward_best_vote", lambda votes, truth: (_routing_k[0], STACK_KS, None)
        )
    if name == "-shift":
        return {}, _wrapped_stack(lambda s: replace(s, shift=0.0))
    if name == "-guard":
        return {}, same  # the guard is dropped after the fit (`_fold`)
    raise ValueError(name)


VARIANTS = (
    "full",
    "-out-of-fold",
    "-locus share",
    "weakest pull",
    "level=knn",
    "-best vote",
    "-shift",
    "-guard",
)
_routing_k = [5]  # the k the out-of-fold fit routes by, for "-best vote"


@contextlib.contextmanager
def _routing_k_seen() -> Iterator[None]:
    """Record the routing k `cross_fitted_parts` passes on (`mix_k`)."""
    original = cross_fit.fit_cross_fitted_stack

    def fitted(*args: Any, **kwargs: Any) -> Any:
        _routing_k[0] = int(kwargs["mix_k"])
        return original(*args, **kwargs)

    with mock.patch.object(cross_fit, "fit_cross_fitted_stack", fitted):
        yield


def _fold(
    data: Any, splits: np.ndarray, config: TrainingConfig
) -> tuple[dict[str, Routed], np.ndarray]:
    """Every variant's decisions on one fold's test queries, LOCUS trained once; and the
    plain 20-neighbour vote's P(correct) there."""
    table, vectors = data.table, data.vectors
    fold = data.with_splits(splits)
    train, val, test = (fold.rows(split) for split in ("train", "val", "test"))
    model = Locus(config)
    model.fit(table, vectors, train, val, text_encoder_name=data.encoder)
    found = {}
    for name in VARIANTS:
        options, patches = _variant(name)
        with _routing_k_seen(), patches:
            router = StackedRouter.fit(
                LocusRouter(model),
                Evidence.from_table(table, vectors, train),
                Evidence.from_table(table, vectors, val),
                factors=False,
                **options,
            )
        if name == "-guard":
            router.guard = None
        found[name] = Routed.of(router, table, vectors, test, train)
    pool = np.concatenate([train, val])
    vote = nearest_vote(vectors[pool], table.scores[pool], vectors[test])
    return found, vote


def figures_of(routed: Routed, planted: np.ndarray | None) -> dict[str, float]:
    """hit@1 (drawn scores; expected under `planted` skills where given), log-loss, AUROC, ECE,
    and the same told each query's task."""
    rows = np.arange(len(routed.truth))
    first = routed.order[:, 0]
    out = {"hit@1": float(np.nanmean(routed.truth[rows, first]))}
    if planted is not None:  # the choice among every LLM, as a new prompt gets it
        out["planted hit@1"] = float(planted[rows, routed.free["LOCUS, guarded"]].mean())
        best = routed.free["best single LLM"]  # chosen on the fold's training queries
        out["planted hit@1 of the best single LLM"] = float(planted[rows, best].mean())
    metrics = correctness_metrics(routed.proba, routed.truth)
    out |= {name: float(metrics[name]) for name in ("log_loss", "auroc", "ece")}
    if routed.given is not None and routed.given_proba is not None:
        out["told hit@1"] = float(np.nanmean(routed.truth[rows, routed.given]))
        if planted is not None:
            out["told planted hit@1"] = float(planted[rows, routed.given].mean())
        told = correctness_metrics(routed.given_proba, routed.truth)
        out["told log_loss"] = float(told["log_loss"])
    return out


def one_pool(
    rows: dict[str, Any],
    seed: int,
    task_of: dict[str, str] | None,
    rates: dict[str, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """Each variant's out-of-fold figures on the pool of CSV columns `rows`; `task_of`: each
    question's planted task by its text, and `rates` each LLM's planted rate per task (the
    expected hit@1 of a planted pool), or None."""
    with (
        tempfile.TemporaryDirectory(prefix="locus-ablation-small-") as folder,
        csv_pool_store(Path(folder), rows) as store,
    ):
        data = workspace_table(store)
        parts: dict[str, list[Routed]] = {name: [] for name in VARIANTS}
        votes, truths, tested = [], [], []
        hashes = list(data.table.text_hashes)
        for splits in kfold_splits(hashes, folds=FOLDS, seed=seed):
            found, vote = _fold(data, splits, TrainingConfig())
            for name, routed in found.items():
                parts[name].append(routed)
            votes.append(vote)
            truths.append(found["full"].truth)
            tested += [data.table.query_texts[i] for i in data.with_splits(splits).rows("test")]
        llms = list(data.table.llm_ids)
    joined = {name: Routed.joined(found) for name, found in parts.items()}
    planted = None
    if task_of is not None:
        skill = rates or SKILL
        planted = np.array([[skill[llm][task_of[str(t).strip()]] for llm in llms] for t in tested])
    out = {name: figures_of(routed, planted) for name, routed in joined.items()}
    vote_metrics = correctness_metrics(np.concatenate(votes), np.concatenate(truths))
    out["20 nearest"] = {name: float(vote_metrics[name]) for name in ("log_loss", "auroc", "ece")}
    return out


def planted_pool(records: pd.DataFrame, seed: int, with_tasks: bool) -> dict[str, Any]:
    picked, _, rows = draw(records, seed)
    if not with_tasks:
        for columns in rows.values():
            del columns["category"]
    questions = zip(picked["question"], picked["category"], strict=True)
    task_of = {str(q).strip(): t for q, t in questions}
    return one_pool(rows, seed, task_of)


def log_pool(seed: int) -> dict[str, Any]:
    """`bench_sparse_log.py`'s planted log: 600 prompts, each answered by one of 4 LLMs."""
    with tempfile.TemporaryDirectory(prefix="locus-ablation-log-") as folder:
        path, _ = make_log(Path(folder), seed=seed)
        log = pd.read_csv(path)
    categories = questions().set_index("question")["category"]
    task_of = {str(q).strip(): str(categories[q]) for q in log["prompt"]}
    rows = {
        str(llm): {
            "model": part["model"].to_numpy(),
            "prompt": part["prompt"].to_numpy(),
            "correct": part["correct"].to_numpy(),
        }
        for llm, part in log.groupby("model")
    }
    return one_pool(rows, seed, task_of, RATES)


def real_pool(table: pd.DataFrame, seed: int) -> dict[str, Any]:
    picked = pd.concat(
        table[table["category"] == task].sample(100, random_state=seed)
        for task in ("math", "law", "computer science", "history")
    ).reset_index(drop=True)
    rows = {
        llm: {
            "model": llm,
            "prompt": picked["question"].to_numpy(),
            "category": picked["category"].to_numpy(),
            "correct": picked[llm].to_numpy(),
        }
        for llm in LLMS
    }
    return one_pool(rows, seed, None)


def summarise(runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per variant and figure: the full router's mean ± sd over seeds, else the paired change
    (variant minus full) mean ± sd."""
    seeds = sorted(runs)
    out: dict[str, Any] = {}
    for name, figures in runs[seeds[0]].items():
        row = {}
        for metric in figures:
            values = [runs[s][name][metric] for s in seeds]
            if name not in ("full", "20 nearest"):
                values = [v - runs[s]["full"][metric] for v, s in zip(values, seeds, strict=True)]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            row[metric] = f"{statistics.mean(values):+.4f} ± {sd:.4f}"
        out[name] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--pools", nargs="+", default=["planted", "planted-no-tasks", "real", "log"],
        choices=["planted", "planted-no-tasks", "real", "log"],
    )  # fmt: skip
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    shared = require_shared_data()
    archive = shared / "mmlu_pro" / "eval_results" / "model_outputs_Llama-2-7b-hf_5shots.zip"
    with zipfile.ZipFile(archive) as opened:
        records = pd.read_json(opened.open(opened.namelist()[0]))
    real = answers(shared, LLMS) if "real" in args.pools else None
    results: dict[str, Any] = {"seeds": args.seeds, "variants": list(VARIANTS)}
    for pool in args.pools:
        runs = {}
        for seed in args.seeds:
            if pool == "real":
                assert real is not None
                runs[seed] = real_pool(real, seed)
            elif pool == "log":
                runs[seed] = log_pool(seed)
            else:
                runs[seed] = planted_pool(records, seed, with_tasks=pool == "planted")
            for name, figures in runs[seed].items():
                shown = " ".join(f"{m} {v:.4f}" for m, v in figures.items())
                print(f"{pool} seed {seed} {name:>15}: {shown}", flush=True)
        results[pool] = {"summary": summarise(runs), "runs": runs}
        for name, row in results[pool]["summary"].items():
            print(f"{pool} {name:>15}: " + " · ".join(f"{m} {v}" for m, v in row.items()))
    report(f"ablation-small{args.tag}", results)


if __name__ == "__main__":
    main()
