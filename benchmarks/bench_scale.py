"""Leaderboard scale: synthetic pools of growing size through the CLI, timed, with peak memory.

A pool is L LLMs x Q queries with a share `observed` of the cells scored, written as one long
Parquet table (`llm_id, query_text, task, score`: the `table` format people have), generated
in blocks so the generator itself stays small. Correctness is low-rank: each LLM has a skill
vector and each query a need vector over `rank` latent abilities, plus a per-task offset and an
LLM level; score ~ Bernoulli(sigmoid(.)). Query texts are drawn from per-task vocabularies so
the text encoder has something to read.

Each step runs as its own `locus` process under `/usr/bin/time` (wall seconds, peak RSS):
import, encode (the static encoder: the MiniLM one runs ~130 texts/s on 2 cores), fit, cold
route (one text, a fresh process), evaluate.

    python benchmarks/bench_scale.py --size 100x10000 [--size 300x30000] [--steps import,fit]
        [--scratch /tmp/locus-scale] [--fit-steps 150]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO_ROOT, report

# LOCUS_BIN: another build's `locus` (e.g. a worktree of an earlier commit, for before/after)
LOCUS = os.environ.get("LOCUS_BIN", str(REPO_ROOT / ".venv" / "bin" / "locus"))
STEPS = ("import", "encode", "fit", "route", "evaluate")
WORDS = [f"w{i}" for i in range(4000)]


def generate(path: Path, n_llms: int, n_queries: int, *, observed: float = 0.8, rank: int = 8,
             tasks: int = 20, seed: int = 0, block: int = 2000) -> int:  # fmt: skip
    """Write the pool to `path` (Parquet, one row group per block of queries); the scores."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    skills = rng.normal(size=(n_llms, rank)).astype(np.float32)
    level = rng.normal(scale=1.0, size=n_llms).astype(np.float32)
    task_offset = rng.normal(scale=0.7, size=(tasks, n_llms)).astype(np.float32)
    vocab = [rng.choice(len(WORDS), size=60, replace=False) for _ in range(tasks)]
    llm_ids = np.array([f"llm-{i:05d}" for i in range(n_llms)], dtype=object)
    total = 0
    schema = pa.schema(
        [
            ("llm_id", pa.string()),
            ("query_text", pa.string()),
            ("task", pa.string()),
            ("score", pa.float32()),
        ]
    )
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, n_queries, block):
            count = min(block, n_queries - start)
            task = rng.integers(tasks, size=count)
            need = rng.normal(size=(count, rank)).astype(np.float32) / np.sqrt(rank)
            logits = need @ skills.T + level + task_offset[task]
            scores = (rng.random(logits.shape) < 1 / (1 + np.exp(-logits))).astype(np.float32)
            seen = rng.random(logits.shape) < observed
            texts = np.array(
                [
                    f"q{start + i} " + " ".join(WORDS[w] for w in rng.choice(vocab[t], size=12))
                    for i, t in enumerate(task)
                ],
                dtype=object,
            )
            rows, cols = np.nonzero(seen)
            total += len(rows)
            writer.write_table(
                pa.table(
                    {
                        "llm_id": llm_ids[cols],
                        "query_text": texts[rows],
                        "task": np.array([f"task-{t}" for t in task], dtype=object)[rows],
                        "score": scores[rows, cols],
                    },
                    schema=schema,
                )
            )
    return total


def timed(args: list[str], env: dict[str, str]) -> dict[str, float | str]:
    """Run one command under /usr/bin/time: wall seconds, peak RSS (GB), its last line."""
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "TIME %e %M", *args], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - started
    found = re.findall(r"TIME ([\d.]+) (\d+)", done.stderr)
    if done.returncode != 0 or not found:
        return {"failed": done.returncode, "stderr": done.stderr[-600:]}
    last = (done.stdout.strip().splitlines() or [""])[-1][:160]
    return {"seconds": round(wall, 1), "peak_rss_gb": round(int(found[-1][1]) / 2**20, 3),
            "last_line": last}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", action="append", help="LLMSxQUERIES, e.g. 100x10000")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/locus-scale"))
    parser.add_argument("--fit-steps", type=int, default=None)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    steps = args.steps.split(",")
    env = {**os.environ, "LOCUS_NO_PROGRESS": "1", "HF_HUB_OFFLINE": "1"}
    results = []
    for size in args.size or ["100x10000"]:
        n_llms, n_queries = (int(x) for x in size.split("x"))
        folder = args.scratch / size
        folder.mkdir(parents=True, exist_ok=True)
        table = folder / "scores.parquet"
        row: dict[str, object] = {"llms": n_llms, "queries": n_queries}
        if not table.exists():
            started = time.perf_counter()
            row["scores"] = generate(table, n_llms, n_queries)
            print(f"{size}: generated {row['scores']:,} scores in "
                  f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
        row["file_mb"] = round(table.stat().st_size / 2**20, 1)
        ws = str(folder / "ws")
        commands = {
            "import": [LOCUS, "import", "table", str(table), "-w", ws, "--source", "synth"],
            "encode": [LOCUS, "encode", "--encoder", "minilm-static", "-w", ws],
            "fit": [LOCUS, "fit", "-w", ws]
            + (["--set", f"max_steps={args.fit_steps}"] if args.fit_steps else []),
            "route": [LOCUS, "route", "q1 w1 w2 w3 an unseen query", "-w", ws, "--json"],
            "evaluate": [LOCUS, "evaluate", "-w", ws, "--json"],
        }
        for step in steps:
            row[step] = timed(commands[step], env)
            print(f"{size} {step}: {row[step]}", flush=True)
            if "failed" in row[step]:  # the later steps need this one (route needs a fit)
                break
        db = Path(ws) / "locus.db"
        if db.exists():
            row["workspace_mb"] = round(db.stat().st_size / 2**20, 1)
        results.append(row)
    report(f"scale{'-' + args.tag if args.tag else ''}", {"runs": json.loads(json.dumps(results))})


if __name__ == "__main__":
    main()
