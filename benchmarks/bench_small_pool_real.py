"""A small pool of real LLMs: 5 LLMs' own MMLU-Pro answers on 400 questions (100 each of maths,
law, computer science and history), one CSV per LLM with the columns people have (model,
prompt, category, correct), `locus fit` defaults; 5-fold over the questions, so that every
question is routed once by a router fitted without it.

Per seed (each draws other questions): over the held-out questions, hit@1 (each routed
question scored by the chosen LLM's real answer) of the router of texts and of the router told
each question's task, beside the best single LLM and the per-task table (both from the
training folds' scores) and the oracle; and the P(correct) of every (question, LLM) cell: its
log-loss and AUROC, the router's from the text and told the task, beside the per-task
table's.

    python benchmarks/bench_small_pool_real.py --seeds 0 1 2
    python benchmarks/bench_small_pool_real.py --seeds 0 1 2 3 4 --tag=-7b --llms \
        DeepSeek-Coder-V2 mathstral-7B Mistral-7B-Instruct-v0.2 Qwen1.5-7B-Chat gemma-7b

Writes results/small-pool-real.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import csv_pool_router, report, require_shared_data

from locus.metrics import correctness_metrics

LLMS = (
    "DeepSeek-Coder-V2",
    "mathstral-7B",
    "Meta-Llama-3_1-70B-Instruct",
    "Qwen1.5-7B-Chat",
    "gemma-7b",
)
TASKS = ("math", "law", "computer science", "history")
FOLDS = 5


def answers(shared: Path, llms: tuple[str, ...] = LLMS) -> pd.DataFrame:
    """(question_id, question, category, one column of 0/1 per LLM): the questions of `TASKS`
    every LLM of `llms` answered."""
    frames = []
    for llm in llms:
        archive = shared / "mmlu_pro" / "eval_results" / f"model_outputs_{llm}_5shots.zip"
        with zipfile.ZipFile(archive) as opened:
            records = pd.DataFrame(
                [
                    {
                        key: record.get(key)
                        for key in ("question_id", "question", "category", "answer", "pred")
                    }
                    for name in opened.namelist()
                    if name.endswith(".json") and not name.startswith("__MACOSX/")
                    for record in json.loads(opened.read(name))
                    if isinstance(record, dict)
                ]
            )
        records = records[records["category"].isin(TASKS)].drop_duplicates("question_id")
        correct = (records["pred"] == records["answer"]).astype(int).rename(llm)
        frames.append(
            pd.concat([records[["question_id", "question", "category"]], correct], axis=1)
        )
    table = frames[0]
    for frame in frames[1:]:
        table = table.merge(frame[["question_id", frame.columns[-1]]], on="question_id")
    return table.drop_duplicates("question_id").drop_duplicates("question", keep=False)


def _log_loss(proba: np.ndarray, truth: np.ndarray) -> float:
    p = np.clip(proba, 1e-6, 1 - 1e-6)
    return float(-np.mean(truth * np.log(p) + (1 - truth) * np.log(1 - p)))


def one_fold(
    train: pd.DataFrame, test: pd.DataFrame, folder: Path, llms: tuple[str, ...]
) -> dict[str, np.ndarray]:
    rows = {
        llm: {
            "model": llm,
            "prompt": train["question"].to_numpy(),
            "category": train["category"].to_numpy(),
            "correct": train[llm].to_numpy(),
        }
        for llm in llms
    }
    with csv_pool_router(folder, rows) as router:
        texts, tasks = list(test["question"]), list(test["category"])
        vectors = router.vectors_for(texts)
        columns = [list(router.router.llm_ids).index(llm) for llm in llms]
        from_text = np.asarray(router.router.predict_proba(vectors), np.float64)[:, columns]
        told = np.asarray(router.router.predict_proba_given_tasks(vectors, tasks), np.float64)[
            :, columns
        ]
        chosen = [llms.index(d.llm_id) for d in router.route_texts(texts, top=1)]
        chosen_told = [llms.index(d.llm_id) for d in router.route_texts(texts, top=1, tasks=tasks)]
    rates = train.groupby("category")[list(llms)].mean()
    table = rates.loc[test["category"]].to_numpy(np.float64)
    best = int(np.argmax(train[list(llms)].mean().to_numpy()))
    return {
        "truth": test[list(llms)].to_numpy(np.float64),
        "from_text": from_text,
        "told": told,
        "chosen": np.asarray(chosen),
        "chosen_told": np.asarray(chosen_told),
        "table": np.clip(table, 0.02, 0.98),
        "best": np.full(len(test), best),
    }


def one_seed(
    table: pd.DataFrame, seed: int, per_task: int, llms: tuple[str, ...]
) -> dict[str, Any]:
    picked = pd.concat(
        table[table["category"] == task].sample(per_task, random_state=seed) for task in TASKS
    ).reset_index(drop=True)
    fold = np.random.default_rng(seed).permutation(len(picked)) % FOLDS
    parts: list[dict[str, np.ndarray]] = []
    for f in range(FOLDS):
        with tempfile.TemporaryDirectory(prefix="locus-small-real-") as folder:
            parts.append(one_fold(picked[fold != f], picked[fold == f], Path(folder), llms))
    got = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    truth, rows = got["truth"], np.arange(len(got["truth"]))

    def hit(choice: np.ndarray) -> float:
        return float(truth[rows, choice].mean())

    def quality(proba: np.ndarray) -> dict[str, float]:
        metrics = correctness_metrics(proba, truth)
        return {"log_loss": _log_loss(proba, truth), "auroc": float(metrics["auroc"])}

    return {
        "hit@1 router of texts": hit(got["chosen"]),
        "hit@1 router told the task": hit(got["chosen_told"]),
        "hit@1 per-task table": hit(np.argmax(got["table"], axis=1)),
        "hit@1 best single LLM": hit(got["best"]),
        "hit@1 oracle": float(truth.max(axis=1).mean()),
        **{f"{k} router of texts": v for k, v in quality(got["from_text"]).items()},
        **{f"{k} router told the task": v for k, v in quality(got["told"]).items()},
        **{f"{k} per-task table": v for k, v in quality(got["table"]).items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--per-task", type=int, default=100)
    parser.add_argument(
        "--llms", nargs="+", default=list(LLMS), help="LLMs of the MMLU-Pro results (5 shots)"
    )
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    llms = tuple(args.llms)
    table = answers(require_shared_data(), llms)
    runs = {}
    for seed in args.seeds:
        runs[seed] = one_seed(table, seed, args.per_task, llms)
        print(seed, {k: round(v, 4) for k, v in runs[seed].items()}, flush=True)
    figures: dict[str, Any] = {"seeds": args.seeds, "llms": list(llms), "tasks": list(TASKS)}
    for key in runs[args.seeds[0]]:
        values = [runs[s][key] for s in args.seeds]
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        figures[key] = f"{statistics.mean(values):.4f} ± {sd:.4f}"
    figures["runs"] = runs
    report(f"small-pool-real{args.tag}", figures)


if __name__ == "__main__":
    main()
