"""The whole pipeline on real data with the real text encoder: ZeroEval, one file per LLM.

A subset (8 LLMs x 240 queries) keeps it to seconds: each LLM's results are written to a file of
its own and imported separately, as results usually arrive; then encode (all-MiniLM-L6-v2,
offline), fit, refine every LLM from all its non-test scores, and route through the workspace
router. Skipped where `../shared/locus-data` is absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.pipeline import embed_workspace_llms, evaluate_workspace, fit_workspace
from locus.pipeline.workspace_router import WorkspaceRouter
from locus.store import Store
from locus.store.ingest import import_path
from locus.text import get_text_encoder
from locus.text.cache import encode_missing
from tests.nn.conftest import small_config

pytestmark = pytest.mark.realdata


def test_zeroeval_one_file_per_llm_end_to_end(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / "zeroeval"
    scores = pd.read_csv(folder / "scores.csv.gz")
    queries = pd.read_json(folder / "queries.jsonl.gz", lines=True)
    counts = scores.groupby("llm_id").size().sort_values(ascending=False)
    llms = list(counts.index[:8])
    chosen = queries.groupby("task").head(80)["query_id"]  # 80 per task, 3 tasks
    subset = scores[scores["llm_id"].isin(llms) & scores["query_id"].isin(chosen)]
    subset = subset.merge(queries[["query_id", "query_text"]], on="query_id")
    workspace = tmp_path / "ws"
    with Store.open(workspace) as store:
        for llm, rows in subset.groupby("llm_id"):
            path = tmp_path / f"{llm}.csv"
            rows.to_csv(path, index=False)
            import_path(store, "table", path)  # one source per file
        counts_after = store.counts()
        table = store.score_table()
        assert counts_after["sources"] == 8 and table.n_queries == len(set(subset["query_id"]))
        assert (~np.isnan(table.scores)).sum() == len(subset)  # every score on a shared query
        encoder = get_text_encoder()
        report = encode_missing(store, encoder)
        assert report.encoded == table.n_queries
        fit_workspace(store, small_config(max_steps=60, anchors=100))
        before = evaluate_workspace(store)
        refined = embed_workspace_llms(store)
        after = evaluate_workspace(store)
        assert len(refined) == 8 and all(r.cosine_moved is not None for r in refined)
        assert after.llms == before.llms == 8
        assert 0.0 <= after.routing.hit_at_1 <= after.baselines.oracle
        router = WorkspaceRouter(store, text_encoder=encoder)
        known = str(table.query_texts[0])
        decision = router.route_texts([known, "What is 12 * 13? Answer with a number."])
        assert router.vectors.encoded == 1 and decision[0].llm_id in llms


# the issue's own small pool: three specialists and a small LLM, per task P(correct)
_SKILL = {
    "math-llm": {"math": 0.92, "law": 0.40, "computer science": 0.55, "history": 0.50},
    "law-llm": {"math": 0.35, "law": 0.90, "computer science": 0.30, "history": 0.55},
    "coder-llm": {"math": 0.55, "law": 0.30, "computer science": 0.93, "history": 0.45},
    "small-llm": {"math": 0.35, "law": 0.45, "computer science": 0.40, "history": 0.55},
}


def test_a_small_pool_of_real_questions_routes_by_its_per_task_scores(
    shared_data: Path, tmp_path: Path
) -> None:
    """4 LLMs x 200 real MMLU-Pro questions (50 each of maths, law, computer science and
    history), one CSV per LLM with the columns people have (model, prompt, category,
    correct), planted per-task skills. The previous version fitted LOCUS alone here and sent
    every query, the landlord's included, to the coder; the floor routes by the scores."""
    import zipfile

    archive = shared_data / "mmlu_pro" / "eval_results" / "model_outputs_Llama-2-7b-hf_5shots.zip"
    with zipfile.ZipFile(archive) as opened:
        records = pd.read_json(opened.open(opened.namelist()[0]))
    rng = np.random.default_rng(0)
    picked = pd.concat(
        records[records["category"] == task].sample(50, random_state=1)
        for task in _SKILL["math-llm"]
    )
    for llm, skill in _SKILL.items():
        rows = pd.DataFrame(
            {
                "model": llm,
                "prompt": picked["question"].to_numpy(),
                "category": picked["category"].to_numpy(),
                "correct": [int(rng.random() < skill[t]) for t in picked["category"]],
            }
        )
        rows.to_csv(tmp_path / f"{llm}.csv", index=False)
    with Store.open(tmp_path / "ws") as store:
        for llm in _SKILL:
            import_path(store, "table", tmp_path / f"{llm}.csv")
        encode_missing(store, get_text_encoder())
        fit_workspace(store, small_config(max_steps=60, anchors=100))
        router = WorkspaceRouter(store)
        [landlord] = router.route_texts(["Can my landlord evict me without notice?"])
        assert landlord.llm_id == "law-llm"
        # every question of the pool routed, scored by the planted skills: near the per-task
        # table's expected hit@1 (0.775 against 0.825 measured: the task is read from the
        # text's neighbours, and maths and computer science questions share some), far above
        # the best single LLM's (0.59); the previous version, fitted by `locus fit` on such
        # files, sent every query to the best single LLM, the landlord's to the coder
        chosen = [d.llm_id for d in router.route_texts(list(picked["question"]), top=1)]
        tasks = list(picked["category"])
        routed = np.mean([_SKILL[llm][t] for llm, t in zip(chosen, tasks, strict=True)])
        per_task = np.mean([max(_SKILL[llm][t] for llm in _SKILL) for t in tasks])
        best_single = max(np.mean([_SKILL[llm][t] for t in tasks]) for llm in _SKILL)
        assert routed >= per_task - 0.06 and routed > best_single + 0.15, (routed, per_task)
        # told each question's task (`locus route --task`), the router routes as the per-task
        # table, which reads the true task: within 2 points of it (issue 37's target)
        told = router.route_texts(list(picked["question"]), top=1, tasks=tasks)
        told_hit = np.mean([_SKILL[d.llm_id][t] for d, t in zip(told, tasks, strict=True)])
        assert told_hit >= per_task - 0.02, (told_hit, per_task)
        [told_landlord] = router.route_texts(["Is this eviction lawful?"], tasks=["law"])
        assert told_landlord.llm_id == "law-llm"
        # told the task, each specialist's P(correct) on its own task is its rate there in the
        # files (within 0.04), not the 0.99 that weights fitted on the text's blurred task
        # votes read it at
        vectors = router.vectors_for(list(picked["question"]))
        told_p = router.router.predict_proba_given_tasks(vectors, tasks)
        llms, labels = list(router.router.llm_ids), np.asarray(tasks)
        for llm, task in (
            ("math-llm", "math"),
            ("law-llm", "law"),
            ("coder-llm", "computer science"),
        ):
            rate = pd.read_csv(tmp_path / f"{llm}.csv").query("category == @task")["correct"].mean()
            read = float(told_p[labels == task, llms.index(llm)].mean())
            assert abs(read - rate) < 0.04, (llm, read, rate)
