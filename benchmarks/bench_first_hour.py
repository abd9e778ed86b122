"""A new user's first hour, timed on a fresh clone: the README's path from `make demo` to a
served chat request, each step a real process.

1. `make demo` (the install included): import, encode, fit, evaluate, route, the cost rule;
2. `locus route ... --quality 0.95` on the demo's workspace;
3. their own pool: one CSV per LLM (`model,prompt,correct`, 5 LLMs x 200 MMLU-Pro questions
   from the real result files) imported into a new workspace, encoded, fitted, routed,
   evaluated;
4. `locus onboard` of an endpoint on 127.0.0.1 that replays what a real MMLU-Pro LLM wrote
   (`bench_onboard.Replay`), into the demo's workspace;
5. `locus serve` on 127.0.0.1, waited for by /ready, and one chat request routed to the
   onboarded LLM's endpoint.

    git clone . /tmp/fresh && python benchmarks/bench_first_hour.py --clone /tmp/fresh

Prints each step's seconds and writes benchmarks/results/first-hour.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import report
from benchmarks.bench_onboard import DATA, Replay, replayed_answers

from locus.data.importers.mmlu_pro import mmlu_pro_llm_id

OWN_LLMS = ("Meta-Llama-3_1-8B-Instruct", "Mistral-7B-Instruct-v0.2", "Qwen1.5-72B-Chat",
            "gemma-7b", "Yi-34B")  # fmt: skip
REPLAYED = "Meta-Llama-3_1-8B-Instruct"
QUESTIONS = 200
STEP_LIMIT_S = 1800


def run(clone: Path, *command: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    """(seconds, stdout) of one command in the clone; a failure stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(
        list(command), cwd=clone, capture_output=True, text=True, timeout=STEP_LIMIT_S,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def own_csvs(folder: Path) -> list[Path]:
    """One file per LLM as people write them: model, prompt, correct (true/false)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    zips = result_files()
    for llm in OWN_LLMS:
        with zipfile.ZipFile(zips[llm]) as archive:
            records = json.loads(archive.read(archive.namelist()[0]))
        records = sorted(records, key=lambda r: int(r["question_id"]))
        records = records[:: len(records) // QUESTIONS][:QUESTIONS]  # every category
        path = folder / f"{llm}.csv"
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(["model", "prompt", "category", "correct"])
            for r in records:
                writer.writerow([llm, r["question"], r["category"], r["pred"] == r["answer"]])
        paths.append(path)
    return paths


def result_files() -> dict[str, Path]:
    """llm_id -> its MMLU-Pro result file."""
    return {mmlu_pro_llm_id(p): p for p in DATA.glob("model_outputs_*.zip")}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_once(clone: Path, locus: str) -> dict[str, float]:
    """Start `locus serve`, wait for /ready, send one chat request, stop it."""
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen(
        [locus, "serve", "--host", "127.0.0.1", "--port", str(port), "--no-auth"], cwd=clone,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise SystemExit(f"locus serve exited: {process.stderr.read()[-2000:]!r}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("locus serve was not ready in 300 s")
            time.sleep(0.2)
        ready = time.perf_counter() - started
        question = "Which enzyme unwinds the DNA double helix during replication?"
        sent = time.perf_counter()
        answer = httpx.post(
            f"{url}/v1/chat/completions", timeout=60,
            json={"model": "locus", "messages": [{"role": "user", "content": question}]},
        )  # fmt: skip
        if answer.status_code != 200:
            raise SystemExit(f"chat request: {answer.status_code} {answer.text[:500]}")
        return {
            "serve_ready_s": ready,
            "chat_s": time.perf_counter() - sent,
            "answered_by": answer.headers.get("x-locus-llm"),  # type: ignore[dict-item]
        }
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clone", type=Path, required=True, help="a fresh clone of the repo")
    args = parser.parse_args()
    clone = args.clone.resolve()
    locus = str(clone / ".venv" / "bin" / "locus")
    figures: dict[str, Any] = {}
    figures["make_demo_s"], _ = run(clone, "make", "demo")
    query = "Under the Fourth Amendment, when may police search a car without a warrant?"
    figures["route_quality_s"], routed = run(clone, locus, "route", query, "--quality", "0.95")
    figures["route_quality_llm"] = routed.split()[0] if routed else None
    own = clone / "own"
    paths = own_csvs(own / "files")
    figures["own_import_s"], _ = run(
        clone, locus, "import", "auto", *map(str, paths), "-w", str(own)
    )
    figures["own_encode_s"], _ = run(clone, locus, "encode", "-w", str(own))
    figures["own_fit_s"], _ = run(clone, locus, "fit", "-w", str(own))
    figures["own_route_s"], _ = run(clone, locus, "route", query, "-w", str(own))
    seconds, evaluated = run(clone, locus, "evaluate", "-w", str(own), "--json")
    figures["own_evaluate_s"] = seconds
    result = json.loads(evaluated)
    figures["own_hit@1"] = result["routing"]["hit@1"]
    figures["own_best_single"] = result["baselines"]["best_single_llm"]
    replay = Replay(replayed_answers(result_files()[REPLAYED]), REPLAYED)
    try:
        figures["onboard_s"], _ = run(
            clone, locus, "onboard", "my-llm", "--endpoint", replay.url, "--model", REPLAYED
        )
        figures.update(serve_once(clone, locus))
    finally:
        replay.close()
    figures["first_hour_s"] = sum(v for k, v in figures.items() if k.endswith("_s"))
    report("first-hour", figures)


if __name__ == "__main__":
    main()
