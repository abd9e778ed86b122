"""How long `locus fit` takes, as a user runs it, beside another checkout of locus.

Two pools:

- `demo`: the workspace `make demo` builds (MMLU-Pro, 29 LLMs x 11,890 questions), fitted
  into an artifact of its own (`--artifact speed`), so the demo's own is kept;
- `log`: a production log as a gateway writes it, 600 rows of `timestamp,prompt,model,correct`,
  one LLM per prompt: 600 real MMLU-Pro questions of 5 categories, each answered by one of 4
  LLMs drawn at random, its outcome drawn from planted rates (a maths specialist 0.9 on maths,
  a coder 0.93 on computer science, a generalist 0.72, a cheap one 0.6), imported and encoded
  once (`make_log`).

Each checkout's `locus fit` runs as its own process, alternating between the checkouts, so
that the machine's drift falls on both; the figures are wall seconds, min / median / max, and
the ratio of the medians.

    python benchmarks/bench_fit_speed.py --runs 3 --before /path/to/other/checkout/src
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, report
from _planted_log import make_log


def locus_command(source: Path | None) -> tuple[list[str], dict[str, str]]:
    """The `locus` CLI of the checkout whose `src/` is `source` (None: the installed one)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if source is not None:
        env["PYTHONPATH"] = str(source)
    return [sys.executable, "-c", "import sys; from locus.cli import main; sys.exit(main())"], env


def timed_fit(source: Path | None, workspace: Path, artifact: str) -> float:
    command, env = locus_command(source)
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "fit", "-w", str(workspace), "--artifact", artifact, "--quiet"],
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"locus fit failed ({source or 'installed'}):\n{done.stderr[-2000:]}")
    return seconds


def summary(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout's src/ to time beside")
    parser.add_argument(
        "--demo", type=Path, default=REPO_ROOT / ".locus", help="make demo's workspace"
    )
    parser.add_argument("--pools", nargs="+", default=["demo", "log"], choices=["demo", "log"])
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    workspaces = {"demo": args.demo}
    if "log" in args.pools:
        log_workspace = REPO_ROOT / ".bench" / "fit-speed" / "log"
        if not (log_workspace / "locus.db").exists():
            path, _ = make_log(REPO_ROOT / ".bench" / "fit-speed")
            command, env = locus_command(None)
            for step in (["import", str(path)], ["encode"]):
                subprocess.run(
                    [*command, *step, "-w", str(log_workspace), "--quiet"], env=env, check=True
                )
        workspaces["log"] = log_workspace
    sides: dict[str, Path | None] = {"this checkout": None}
    if args.before is not None:
        sides["before"] = args.before.resolve()
    times: dict[str, dict[str, list[float]]] = {
        pool: {side: [] for side in sides} for pool in args.pools
    }
    for run in range(args.runs):
        for pool in args.pools:
            for side, source in sides.items():
                seconds = timed_fit(source, workspaces[pool], f"speed-{side.split()[0]}")
                times[pool][side].append(seconds)
                print(f"run {run}: {pool} {side}: {seconds:.1f} s", flush=True)
    figures: dict[str, Any] = {}
    for pool, by_side in times.items():
        figures[pool] = {side: summary(values) for side, values in by_side.items()}
        if "before" in by_side:
            figures[pool]["ratio"] = statistics.median(
                by_side["this checkout"]
            ) / statistics.median(by_side["before"])
    report(f"fit-speed{args.tag}", figures)


if __name__ == "__main__":
    main()
