"""A production log as the user has it: does locus route its new prompts to the specialists?

The log (`_planted_log`): 600 real MMLU-Pro questions of 5 categories, each answered by one of
4 LLMs drawn uniformly (a maths specialist 0.9 on maths, a coder 0.93 on computer science, a
generalist 0.72, a cheap one 0.6), columns `timestamp,prompt,model,correct`, no task. Per
seed, as a user runs it: `locus import`, `locus encode`, `locus fit` (timed), `locus route
--file` on 100 prompts held out of the log (20 per category), `locus evaluate --folds 5`.

Figures, scored by the planted rates (the expected hit@1 of each choice):

- the share of maths prompts routed to the specialist, and of computer-science ones to the
  coder (issue 54's target: 80% each);
- the expected hit@1 of locus's routes beside: the per-topic table fitted on the same log
  (it is told each prompt's category, which the log does not carry), the best single LLM of
  the log, always the generalist, and the planted oracle (the best LLM per category);
- fit and evaluate seconds; the off-policy estimates of `locus evaluate --folds 5`, with
  their 95% intervals (not yet set beside each router's planted truth on the log's own
  prompts: evaluate gives estimates, not choices).

    python benchmarks/bench_sparse_log.py --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, report
from _planted_log import CATEGORIES, RATES, SPECIALISTS, make_log, questions
from bench_fit_speed import locus_command


def run(*args: str) -> tuple[str, float]:
    command, env = locus_command(None)
    started = time.perf_counter()
    done = subprocess.run([*command, *args], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"locus {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout, seconds


def expected(choices: list[str], categories: list[str]) -> float:
    return statistics.mean(RATES[llm][c] for llm, c in zip(choices, categories, strict=True))


def one_seed(seed: int, folder: Path) -> dict[str, Any]:
    import pandas as pd

    log_path, new = make_log(folder, rows=600, seed=seed, new=20)
    workspace = str(folder / "workspace")
    run("import", str(log_path), "-w", workspace, "--quiet")
    run("encode", "-w", workspace, "--quiet")
    _, fit_seconds = run("fit", "-w", workspace, "--quiet")
    prompts = folder / "new.txt"
    prompts.write_text("\n".join(q.replace("\n", " ") for q in new["question"]) + "\n")
    out, _ = run("route", "-f", str(prompts), "-w", workspace, "--json")
    chosen = [row["llm_id"] for row in json.loads(out)]
    categories = list(new["category"])
    log = pd.read_csv(log_path)
    topic = questions().set_index("question")["category"]
    log["category"] = topic.reindex(log["prompt"]).to_numpy()
    table = log.groupby(["category", "model"])["correct"].mean().unstack()
    per_topic = [str(table.loc[c].idxmax()) for c in categories]
    best_single = str(log.groupby("model")["correct"].mean().idxmax())
    oracle = [max(RATES, key=lambda llm: RATES[llm][c]) for c in categories]

    def shares(routes: list[str]) -> dict[str, float]:
        return {
            category: statistics.mean(
                llm == specialist
                for llm, c in zip(routes, categories, strict=True)
                if c == category
            )
            for category, specialist in SPECIALISTS.items()
        }

    share, table_share = shares(chosen), shares(per_topic)
    evaluated, evaluate_seconds = run("evaluate", "-w", workspace, "--folds", "5", "--json")
    estimates = json.loads(evaluated)["offpolicy"]["estimates"]
    return {
        "fit_seconds": fit_seconds,
        "evaluate_folds_seconds": evaluate_seconds,
        "specialist_share": share,
        "specialist_share_per_topic_table": table_share,
        "routed_to": {llm: chosen.count(llm) for llm in RATES},
        "expected_hit@1": {
            "locus": expected(chosen, categories),
            "per-topic table (told the topic)": expected(per_topic, categories),
            f"best single of the log ({best_single})": expected(
                [best_single] * len(categories), categories
            ),
            "always big-gen": expected(["big-gen"] * len(categories), categories),
            "planted oracle": expected(oracle, categories),
        },
        "offpolicy_estimates": {
            name: {m: by[m] for m in ("ips", "dr")} for name, by in estimates.items()
        },
    }


def mean_sd(values: list[float]) -> dict[str, float]:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.mean(values), "sd": sd}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    runs = {}
    for seed in args.seeds:
        folder = REPO_ROOT / ".bench" / "sparse-log" / f"seed{seed}"
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        runs[seed] = one_seed(seed, folder)
        print(f"seed {seed}: {json.dumps(runs[seed], default=float)[:600]}", flush=True)
    first = runs[args.seeds[0]]
    summary: dict[str, Any] = {
        "fit_seconds": mean_sd([r["fit_seconds"] for r in runs.values()]),
        "evaluate_folds_seconds": mean_sd([r["evaluate_folds_seconds"] for r in runs.values()]),
        "specialist_share": {
            c: mean_sd([r["specialist_share"][c] for r in runs.values()]) for c in SPECIALISTS
        },
        "specialist_share_per_topic_table": {
            c: mean_sd([r["specialist_share_per_topic_table"][c] for r in runs.values()])
            for c in SPECIALISTS
        },
    }
    # the best single LLM's name differs by seed: its row is keyed by its place
    names = list(first["expected_hit@1"])
    summary["expected_hit@1"] = {
        name.split(" (")[0] if name.startswith("best single") else name: mean_sd(
            [list(r["expected_hit@1"].values())[i] for r in runs.values()]
        )
        for i, name in enumerate(names)
    }
    summary["categories"] = list(CATEGORIES)
    report(f"sparse-log{args.tag}", {"summary": summary, "per_seed": runs})


if __name__ == "__main__":
    main()
