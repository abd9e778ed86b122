"""Importers on the real data in ../shared/locus-data (skipped where that folder is absent).

The default run takes a few seconds; the full 29-file MMLU-Pro import is marked ``slow``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.data.fetch import git_blob_sha1
from locus.data.importers import (
    import_mmlu_pro,
    import_routerbench,
    import_scores_json,
    import_table,
)

pytestmark = pytest.mark.realdata

REAL_DATA = Path(__file__).resolve().parents[3] / "shared" / "locus-data"

# MMLU-Pro: 26 of the 29 files predate a revision of the answer key (33 questions; 16 of them
# with unchanged text). Scored against each file's own key they sit up to 0.0023 below
# models.csv; the importer scores every run against the newest file's key (as models.csv does),
# which brings every LLM within 3 decimals of models.csv.
MODELS_CSV_TOLERANCE = 5e-4


@pytest.fixture(scope="module")
def data() -> Path:
    if not REAL_DATA.is_dir():
        pytest.skip(f"real data not present: {REAL_DATA} (the repo's ../shared/locus-data)")
    return REAL_DATA


def _models_csv(data: Path) -> pd.DataFrame:
    models = pd.read_csv(data / "mmlu_pro" / "models.csv")
    models["llm_id"] = models["model"].str.removesuffix("_5shots")
    return models.set_index("llm_id")


def _accuracy_gaps(batch_scores: pd.DataFrame, models: pd.DataFrame) -> pd.Series:
    measured = batch_scores.groupby("llm_id")["score"].agg(["mean", "size"])
    joined = measured.join(models, how="left")
    assert (joined["size"] == joined["n_answered"]).all()
    return (joined["mean"] - joined["accuracy_on_answered"]).abs()


def test_zeroeval_with_queries_file(data: Path) -> None:
    folder = data / "zeroeval"
    batch = import_table(folder / "scores.csv.gz", queries=folder / "queries.jsonl.gz")
    assert batch.source == "scores"
    assert (batch.n_llms, batch.n_queries, batch.n_scores) == (55, 2840, 128416)
    assert batch.queries["query_text"].notna().all()
    assert batch.queries["task"].value_counts().to_dict() == {
        "gsm": 1319,
        "crux": 800,
        "math-l5": 721,
    }


def test_mmlu_pro_three_files_match_models_csv(data: Path, tmp_path: Path) -> None:
    source = data / "mmlu_pro" / "eval_results"
    chosen = ("DeepSeek-Coder-V2", "Llama-2-7b-hf", "gemini-1.5-pro-002")
    for llm in chosen:
        name = f"model_outputs_{llm}_5shots.zip"
        (tmp_path / name).symlink_to(source / name)
    batch = import_mmlu_pro(tmp_path)
    assert batch.llms["llm_id"].tolist() == list(chosen)
    gaps = _accuracy_gaps(batch.scores, _models_csv(data))
    assert gaps.max() < MODELS_CSV_TOLERANCE
    assert set(batch.queries["task"]) == {
        "biology",
        "business",
        "chemistry",
        "computer science",
        "economics",
        "engineering",
        "health",
        "history",
        "law",
        "math",
        "other",
        "philosophy",
        "physics",
        "psychology",
    }


@pytest.mark.slow
def test_mmlu_pro_full(data: Path) -> None:
    batch = import_mmlu_pro(data / "mmlu_pro" / "eval_results")
    assert batch.n_llms == 29
    assert batch.queries["query_id"].nunique() == 12032
    # 17 question ids carry a revised question or option text in some files: 17 more queries
    assert batch.n_queries == 12032 + 17
    assert batch.n_scores == 347215
    gaps = _accuracy_gaps(batch.scores, _models_csv(data))
    assert gaps.max() < MODELS_CSV_TOLERANCE


def test_mmlu_pro_files_match_their_blob_sha(data: Path) -> None:
    models = pd.read_csv(data / "mmlu_pro" / "models.csv")
    for source_path, sha in zip(models["source_path"], models["blob_sha"], strict=True):
        path = data / "mmlu_pro" / source_path
        assert git_blob_sha1(path.read_bytes()) == sha, path.name


def test_routerbench_each_file(data: Path) -> None:
    files = sorted((data / "routerdc" / "routerbench_zs").glob("*.csv.gz"))
    assert len(files) == 6
    for file in files:
        batch = import_routerbench(file)
        assert batch.n_llms == 11, file.name
        assert batch.scores["cost_usd"].notna().all(), file.name


def test_routerbench_folder(data: Path) -> None:
    batch = import_routerbench(data / "routerdc" / "routerbench_zs")
    assert batch.source == "routerbench"
    assert batch.n_llms == 11
    # 3,178 rows; a few sample_ids carry two different prompts, which stay two queries
    assert (batch.n_queries, batch.n_scores) == (3178, 34804)
    assert batch.queries["query_id"].nunique() == 3164
    assert set(batch.queries["task"]) == {"arc-challenge", "mbpp", "winogrande"}
    assert not batch.queries["query_text"].str.startswith("['").any()


def test_split2_each_file_and_folder(data: Path) -> None:
    folder = data / "routerdc" / "split2_model7"
    files = sorted(folder.glob("*.json.gz"))
    assert len(files) == 16
    for file in files:
        assert import_scores_json(file).n_llms == 7, file.name
    batch = import_scores_json(folder)
    assert batch.n_llms == 7
    assert (batch.n_queries, batch.n_scores) == (20565, 143955)
    graded = batch.scores["score"]
    assert ((graded > 0) & (graded < 1)).mean() > 0.3


def test_mmlu_pro_one_file_per_llm_shares_queries(data: Path, tmp_path: Path) -> None:
    """Two LLMs imported from two separate files, as separate sources, are scored on the same
    queries: a query is its text, whichever file it came from."""
    from locus.store import Store

    source = data / "mmlu_pro" / "eval_results"
    with Store.open(tmp_path / "ws") as store:
        for llm in ("Llama-2-7b-hf", "Mistral-7B-v0.1"):
            folder = tmp_path / llm
            folder.mkdir()
            name = f"model_outputs_{llm}_5shots.zip"
            (folder / name).symlink_to(source / name)
            store.write_batch(import_mmlu_pro(folder, source=f"mmlu-pro-{llm}"), kind="mmlu-pro")
        table = store.score_table()
        counts = store.counts()
    both = (~np.isnan(table.scores)).all(axis=1)
    assert table.n_llms == 2 and both.mean() > 0.99, both.mean()
    assert counts["query_aliases"] > counts["queries"]  # each source keeps its own ids
