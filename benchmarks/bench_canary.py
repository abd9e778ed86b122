"""The canary's power on real answers: does a swap raise its alarm, and is the new LLM named?

MMLU-Pro's eval results keep each LLM's generated text for every question (5-shot chain of
thought; 25 of the 29 LLMs: the files of the 4 API models keep none). Per seed, 20 questions
answered by every LLM are drawn as the canary probes; every LLM's answers are its baseline.
Then every ordered pair (A, B) of distinct LLMs is a swap: B's answers arrive under A's name,
and `locus.pipeline.canary.compare` reads them against the baselines. Figures: the share of
swaps that raise the alarm, the share where B is named ("now answers like B"), and how many of
the 20 answers changed; the same with only the extracted answer letter kept (an endpoint that
answers with a letter), where LLMs agree far more often.

    python benchmarks/bench_canary.py --seeds 0 1 2

Not measured: the false-alarm rate of an unchanged endpoint, which needs the same LLM asked
twice at temperature 0 (these results hold one run per LLM).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import report, require_shared_data

from locus.pipeline.canary import compare


def answers() -> dict[str, dict[str, dict[str, str]]]:
    """{view: {llm: {question_id: answer}}} for the views "text" (the generated text) and
    "letter" (the extracted answer, "(none)" where none was)."""
    folder = require_shared_data() / "mmlu_pro" / "eval_results"
    out: dict[str, dict[str, dict[str, str]]] = {"text": {}, "letter": {}}
    for path in sorted(folder.glob("model_outputs_*.zip")):
        llm = path.name.removeprefix("model_outputs_").removesuffix(".zip")
        with zipfile.ZipFile(path) as opened:
            records = [
                record
                for n in opened.namelist()
                if n.endswith(".json") and "__MACOSX" not in n
                for record in json.loads(opened.read(n))
            ]
        text, letter = out["text"].setdefault(llm, {}), out["letter"].setdefault(llm, {})
        for record in records:
            if not isinstance(record, dict):
                continue
            key = str(record["question_id"])
            text[key] = str(record.get("generated_text") or "")
            letter[key] = str(record.get("pred") or "(none)")
    # LLMs whose files keep no generated text (4 of 29: the API models) are left out
    kept = [
        llm for llm, t in out["text"].items() if sum(bool(x.strip()) for x in t.values()) > 1000
    ]
    return {view: {llm: by[llm] for llm in kept} for view, by in out.items()}


def one_seed(views: dict[str, dict[str, dict[str, str]]], seed: int, probes: int) -> dict[str, Any]:
    texts = views["text"]
    common = sorted(set.intersection(*(set(a) for a in texts.values())))
    common = [q for q in common if all(texts[llm][q].strip() for llm in texts)]
    chosen = list(np.random.default_rng(seed).choice(common, probes, replace=False))
    found: dict[str, Any] = {}
    for view, by_llm in views.items():
        baselines = {llm: {q: a[q] for q in chosen} for llm, a in by_llm.items()}
        alarms = named = 0
        changed: list[int] = []
        for a in baselines:
            for b in baselines:
                if a == b:
                    continue
                check = compare(a, baselines[b], baselines)
                alarms += check.alarm
                named += check.answers_like == b
                changed.append(check.changed)
        pairs = len(changed)
        found[view] = {
            "swaps": pairs,
            "alarm_share": alarms / pairs,
            "named_share": named / pairs,
            "changed_mean": statistics.fmean(changed),
            "changed_min": min(changed),
        }
    return found


def _memoised() -> None:
    """`compare` asks each pair of answers many times over the swaps (each LLM's baseline is
    read against every other's): the same answer to the same question, compared once."""
    import functools

    from locus.pipeline import canary

    canary.same_answer = functools.lru_cache(maxsize=None)(canary.same_answer)  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--probes", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    _memoised()
    views = answers()
    runs = {seed: one_seed(views, seed, args.probes) for seed in args.seeds}
    summary = {
        view: {
            key: {
                "mean": statistics.fmean(r[view][key] for r in runs.values()),
                "sd": statistics.stdev(r[view][key] for r in runs.values())
                if len(runs) > 1
                else 0.0,
            }
            for key in ("alarm_share", "named_share", "changed_mean", "changed_min")
        }
        for view in ("text", "letter")
    }
    report(
        "canary",
        {
            "llms": len(views["text"]),
            "probes": args.probes,
            "summary": summary,
            "per_seed": runs,
            "seconds": time.perf_counter() - started,
        },
    )


if __name__ == "__main__":
    main()
