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
