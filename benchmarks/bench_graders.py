"""The multiple-choice grader against the MMLU-Pro result files' own `pred` (the letter the
benchmark's extraction read from each model's generated text).

For every record of every `model_outputs_*.zip`: our `extract_choice(model_outputs)` beside the
file's `pred`. Agreement is counted where both give a letter; "ours only" / "theirs only" where
one of them reads none. Prints per model and overall; writes results/graders.json.

    python benchmarks/bench_graders.py [--data ../shared/locus-data/mmlu_pro/eval_results]
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO_ROOT, report

from locus.data.graders import extract_choice


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--data",
        type=Path,
        default=REPO_ROOT.parent / "shared" / "locus-data" / "mmlu_pro" / "eval_results",
    )
    args = parser.parse_args()
    total: Counter[str] = Counter()
    per_model = {}
    disagreements = []
    for path in sorted(args.data.glob("model_outputs_*.zip")):
        counts: Counter[str] = Counter()
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                records = json.loads(archive.read(name))
                for record in records if isinstance(records, list) else []:
                    if not isinstance(record, dict):
                        continue
                    theirs = record.get("pred") or None
                    text = record.get("model_outputs") or record.get("generated_text") or ""
                    ours = extract_choice(str(text))
                    if ours and theirs:
                        counts["both"] += 1
                        if ours == theirs:
                            counts["agree"] += 1
                        elif len(disagreements) < 5:
                            disagreements.append(str(text)[-160:])
                    elif ours:
                        counts["ours_only"] += 1
                    elif theirs:
                        counts["theirs_only"] += 1
                    else:
                        counts["neither"] += 1
        name = path.stem.removeprefix("model_outputs_")
        per_model[name] = dict(counts)
        total.update(counts)
    agreement = total["agree"] / max(total["both"], 1)
    figures = {
        "answers": sum(total.values()) - total["agree"],  # agree is a part of both
        "both_parsed": total["both"],
        "agreement": agreement,
        "ours_only": total["ours_only"],
        "theirs_only": total["theirs_only"],
        "neither": total["neither"],
        "worst_models": sorted(
            ((m, c.get("agree", 0) / max(c.get("both", 0), 1)) for m, c in per_model.items()),
            key=lambda pair: pair[1],
        )[:3],
        "disagreement_examples": disagreements,
    }
    report("graders", figures)


if __name__ == "__main__":
    main()
