"""A production log as a gateway writes it, with planted rates: one LLM per prompt.

Real MMLU-Pro questions of 5 categories, each answered by one of 4 LLMs drawn uniformly at
random (the logging policy, probability 1/4 each), its outcome drawn from planted rates: a
maths specialist 0.9 on maths, a coder 0.93 on computer science, a generalist 0.72, a cheap one
0.6. The log is `timestamp,prompt,model,correct`, the columns a gateway has; the prompts held out
of it (`new_prompts`) are what a router is asked afterwards, scored by the planted rates.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from _common import require_shared_data

CATEGORIES = ("math", "computer science", "law", "history", "biology")
RATES: dict[str, dict[str, float]] = {
    "math-spec": {
        "math": 0.90,
        "computer science": 0.55,
        "law": 0.50,
        "history": 0.55,
        "biology": 0.60,
    },
    "coder": {
        "math": 0.60,
        "computer science": 0.93,
        "law": 0.45,
        "history": 0.50,
        "biology": 0.55,
    },
    "big-gen": dict.fromkeys(CATEGORIES, 0.72),
    "cheap": dict.fromkeys(CATEGORIES, 0.60),
}
# the LLM each category's new prompts should go to: its planted best
SPECIALISTS = {"math": "math-spec", "computer science": "coder"}


def questions() -> Any:
    """Every distinct MMLU-Pro question of `CATEGORIES` (a DataFrame: question, category)."""
    import pandas as pd

    archive = require_shared_data() / "mmlu_pro" / "eval_results"
    with zipfile.ZipFile(archive / "model_outputs_Llama-2-7b-hf_5shots.zip") as opened:
        records = pd.read_json(opened.open(opened.namelist()[0]))
    records = records[records["category"].isin(CATEGORIES)]
    return records.drop_duplicates("question")[["question", "category"]].reset_index(drop=True)


def make_log(folder: Path, rows: int = 600, seed: int = 0, new: int = 0) -> tuple[Path, Any]:
    """The log of `rows` prompts (an equal share per category) as `folder`/gateway-log.csv,
    and `new` other prompts per category (a DataFrame: question, category), none in the log."""
    import pandas as pd

    pool = questions()
    per = rows // len(CATEGORIES)
    picked = pd.concat(
        pool[pool["category"] == c].sample(per + new, random_state=seed) for c in CATEGORIES
    )
    logged = picked.groupby("category", sort=False).head(per)
    held_out = picked.drop(logged.index)
    rng = np.random.default_rng(seed)
    llms = rng.choice(list(RATES), size=len(logged))
    correct = [
        int(rng.random() < RATES[llm][c]) for llm, c in zip(llms, logged["category"], strict=True)
    ]
    start = np.datetime64("2026-11-01T00:00:00")
    log = pd.DataFrame(
        {
            "timestamp": [
                str(start + np.timedelta64(int(s), "s"))
                for s in np.sort(rng.integers(0, 30 * 86400, len(logged)))
            ],
            "prompt": list(logged["question"]),
            "model": llms,
            "correct": correct,
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gateway-log.csv"
    log.to_csv(path, index=False)
    return path, held_out.reset_index(drop=True)
