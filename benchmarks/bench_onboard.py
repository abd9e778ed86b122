"""`locus onboard` end to end on real answers: an endpoint on 127.0.0.1 that replays what a real
MMLU-Pro LLM wrote (its `model_outputs` text for each question, from the result files), onboarded
under a new name into a copy of a fitted MMLU-Pro workspace.

Per replayed LLM and probe count: wall time, answers graded / unreadable, how often our grade of
the replayed text agrees with the file's own score, where the original LLM ranks among the new
LLM's nearest (1 = nearest), and the predicted test accuracy beside the original's measured one.
The original is in the pool, so a good placement puts it first.

    python benchmarks/bench_onboard.py --workspace WS [--llm Llama-3-8B-Instruct ...] [--n 32 128]

WS: a workspace holding the MMLU-Pro data with its default artifact fitted (`locus demo -w WS`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO_ROOT, report

from locus.data.importers.mmlu_pro import _options, _query_text, mmlu_pro_llm_id
from locus.data.llm_catalog import Endpoint
from locus.data.query_identity import text_hash
from locus.pipeline.onboard import onboard_llm
from locus.store import Store

DATA = REPO_ROOT.parent / "shared" / "locus-data" / "mmlu_pro" / "eval_results"


def replayed_answers(zip_path: Path) -> dict[str, str]:
    """text hash of each question (as the importer writes it) -> the model's written answer."""
    out: dict[str, str] = {}
    with zipfile.ZipFile(zip_path) as archive:
        for name in archive.namelist():
            records = json.loads(archive.read(name))
            for number, record in enumerate(records if isinstance(records, list) else []):
                if not isinstance(record, dict):
                    continue
                text = _query_text(
                    record["question"], _options(record["options"], name, number + 1)
                )
                answer = record.get("model_outputs") or record.get("generated_text") or ""
                out[text_hash(text)] = str(answer)
    return out


class Replay:
    """A loopback chat-completions server answering each question with the replayed text."""

    def __init__(self, answers: dict[str, str], model: str) -> None:
        self.answers, self.model, self.requests = answers, model, 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def send(self, payload: Any) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self.send({"data": [{"id": fake.model}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                fake.requests += 1
                text = fake.answers.get(text_hash(body["messages"][-1]["content"]), "")
                self.send(
                    {"model": fake.model, "usage": {"prompt_tokens": 0, "completion_tokens": 0},
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
                )  # fmt: skip

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--llm", action="append",
        help="MMLU-Pro LLMs to replay (default: three across the accuracy range)",
    )  # fmt: skip
    parser.add_argument("--n", type=int, action="append")
    parser.add_argument("--seed", type=int, action="append")
    args = parser.parse_args()
    wanted = args.llm or ["Llama-2-7b-hf", "Meta-Llama-3_1-8B-Instruct", "gemini-1.5-pro-002"]
    files = {mmlu_pro_llm_id(p): p for p in args.data.glob("model_outputs_*.zip")}
    rows = []
    with Store.open(args.workspace) as store:
        table = store.score_table()
    for llm in wanted:
        answers = replayed_answers(files[llm])
        column = table.scores[:, table.llm_index(llm)]
        for n in args.n or [32, 128]:
            for seed in args.seed or [0, 1, 2]:
                with tempfile.TemporaryDirectory() as scratch:
                    copy = Path(scratch) / "ws"
                    shutil.copytree(args.workspace, copy)
                    replay = Replay(answers, llm)
                    try:
                        with Store.open(copy) as store:
                            started = time.perf_counter()
                            result = onboard_llm(
                                store, f"{llm}-replay", Endpoint(replay.url, llm), n=n,
                                seed=seed, concurrency=8,
                            )  # fmt: skip
                            seconds = time.perf_counter() - started
                            probes = store.probe_answers(f"{llm}-replay")
                    finally:
                        replay.close()
                rank = next(
                    (i + 1 for i, row in enumerate(result.nearest) if row["llm_id"] == llm), None
                )
                hashes = np.asarray(table.text_hashes)
                graded = {h: a.score for h, a in probes.items() if a.score is not None}
                rows_of = {h: i for i, h in enumerate(hashes)}
                agree = np.mean(
                    [abs(column[rows_of[h]] - s) < 0.5 for h, s in graded.items()]
                )  # fmt: skip
                total = sum(r["queries"] for r in result.per_task)
                predicted = sum(r["predicted"] * r["queries"] for r in result.per_task) / total
                with Store.open(args.workspace) as store:
                    from locus.pipeline.data import workspace_table

                    data = workspace_table(store)
                test = data.rows("test")
                measured = float(np.nanmean(column[test]))
                rows.append(
                    {"llm": llm, "n": n, "seed": seed, "seconds": round(seconds, 2),
                     "graded": result.graded, "ungradable": result.ungradable,
                     "grade_agrees_with_file": round(float(agree), 4),
                     "original_rank_in_nearest": rank,
                     "predicted_test_accuracy": round(predicted, 4),
                     "measured_test_accuracy": round(measured, 4),
                     "nearest": result.nearest[0]["llm_id"]}
                )  # fmt: skip
                print(rows[-1], flush=True)
    report("onboard-replay", {"rows": rows})


if __name__ == "__main__":
    main()
