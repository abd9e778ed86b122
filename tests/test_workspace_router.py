"""`WorkspaceRouter`: vectors + the fitted router + costs: loaded once, cached vectors for known
texts, live pool, costs, artifacts of earlier versions."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.data.batch import ImportBatch
from locus.errors import LocusInputError, LocusNotFoundError
from locus.pipeline import embed_workspace_llms, fit_workspace, workspace_table
from locus.pipeline.workspace_router import WorkspaceRouter
from locus.routing import StackedRouter
from locus.routing.costs import COST_FOLDER
from locus.routing.evidence import unit_rows
from locus.store import Store
from locus.text import HashingEncoder
from tests.conftest import CliResult
from tests.nn.conftest import small_config
from tests.planted_workspace import ENCODER_DIM, build_planted_workspace, planted_rows


class CountingEncoder(HashingEncoder):
    """The workspace's hashing encoder, counting the texts it is asked to encode."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.calls = 0
        self.texts = 0

    def encode(self, texts, *, batch_size: int = 64):  # type: ignore[no-untyped-def, override]
        self.calls += 1
        self.texts += 1 if isinstance(texts, str) else len(texts)
        return super().encode(texts, batch_size=batch_size)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = planted_rows()
    costs = np.where(rows["llm_id"].str.startswith("math-"), 0.02, 0.001)
    path = build_planted_workspace(
        tmp_path_factory.mktemp("router") / "ws", rows.assign(cost_usd=costs)
    )
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=100), exclude_llms=["law-3"])
    return path


def test_stored_texts_use_cached_vectors_and_new_ones_are_encoded_once(workspace: Path) -> None:
    rows = planted_rows()
    known = list(dict.fromkeys(rows["query_text"]))[:50]
    encoder = CountingEncoder(ENCODER_DIM)
    with Store.open(workspace) as store:
        router = WorkspaceRouter(store, text_encoder=encoder)
        # the same texts as imported, with the whitespace the import normalises away
        decisions = router.route_texts([f"  {text}\r\n" for text in known])
        assert len(decisions) == 50 and encoder.texts == 0 and router.vectors.cache_hits == 50
        fresh = ["integral derivative limit new", "court jury verdict new"]
        first = router.route_texts(fresh * 3, guarded=False)
        assert encoder.calls == 1 and encoder.texts == 2  # each new text encoded once
        again = router.route_texts(fresh, guarded=False)
        assert encoder.texts == 2  # then served from memory
        assert [d.llm_id for d in again] == [d.llm_id for d in first[:2]]
        assert first[0].llm_id.startswith("math-") and first[1].llm_id.startswith("law-")
        with pytest.raises(LocusInputError, match="empty"):
            router.route_texts(["  "])


def test_the_fits_guard_routes_by_default(workspace: Path) -> None:
    texts = [f"{topic} question {i}" for i in range(20) for topic in ("court jury", "integral")]
    with Store.open(workspace) as store:
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        guard = router.router.guard
        assert guard is not None and guard.default in router.llm_ids
        assert guard.validation["queries"] > 0 and "unguarded_hit@1" in guard.validation
        every = len(router.llm_ids)
        guarded = router.route_texts(texts, top=every)
        free = router.route_texts(texts, top=every, guarded=False)
    for held, plain in zip(guarded, free, strict=True):
        # a query leaves the default only where the unguarded choice beats it by the margin
        best = plain.ranked[0]
        default_p = next(c.p_correct for c in held.ranked if c.llm_id == guard.default)
        if held.llm_id == guard.default:
            assert held.held == (best.llm_id != guard.default)
            assert best.p_correct - default_p <= guard.margin + 1e-9
        else:
            assert held.llm_id == best.llm_id and best.p_correct - default_p > guard.margin
        assert not plain.held


def test_costs_come_from_the_workspace(workspace: Path) -> None:
    with Store.open(workspace) as store:
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        assert router.costs["math-0"] == pytest.approx(0.02)
        text = ["integral derivative matrix limit polynomial"]
        assert router.route_texts(text)[0].llm_id.startswith("math-")
        cheap = router.route_texts(text, cost_weight=100.0)[0]
        assert not cheap.llm_id.startswith("math-") and cheap.cost_usd == pytest.approx(0.001)
        avoided = router.route_texts(text, unavailable=[f"math-{i}" for i in range(4)])[0]
        assert not avoided.llm_id.startswith("math-")


def test_refresh_sees_llms_onboarded_by_others(workspace: Path) -> None:
    with Store.open(workspace) as store:
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        assert "law-3" not in router.llm_ids
        with Store.open(workspace) as other:  # another process's connection
            embed_workspace_llms(other, ["law-3"])
        before = router.cost_weight_for_budget(0.004)  # the 11 fitted LLMs' validation reading
        router.refresh()
        assert "law-3" in router.llm_ids
        proba = router.predict_proba(router.vectors_for(["court tort appeal"]))
        assert proba.shape == (1, 12)
        # a budget after the refresh is tuned on the pool with law-3, as a new router's is
        fresh = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        for budget in (0.004, 0.008):
            assert router.cost_weight_for_budget(budget) == fresh.cost_weight_for_budget(budget)
        assert before > 0


def test_missing_artifact_and_bad_name(workspace: Path) -> None:
    with Store.open(workspace) as store:
        with pytest.raises(LocusNotFoundError, match="run `locus fit` first"):
            WorkspaceRouter(store, "other")
        with pytest.raises(LocusInputError, match="plain name"):
            WorkspaceRouter(store, "../default")


def test_llm_without_scores_can_join_from_a_new_source(workspace: Path, tmp_path: Path) -> None:
    """An LLM evaluated on the same texts in a file of its own shares the pool's queries."""
    rows = planted_rows()
    newcomer = rows[rows["llm_id"] == "biology-0"].assign(llm_id="bio-new", query_id="other-id")
    newcomer = newcomer.assign(query_id=[f"x{i}" for i in range(len(newcomer))])
    copy = tmp_path / "ws"
    build_planted_workspace(copy)
    with Store.open(copy) as store:
        store.write_batch(
            ImportBatch.from_long(pd.DataFrame(newcomer), source="bio-file", origin="bio.csv"),
            kind="table",
        )
        table = store.score_table()
        column = table.scores[:, table.llm_index("bio-new")]
        shared = ~np.isnan(column) & ~np.isnan(table.scores[:, table.llm_index("biology-0")])
        assert shared.sum() == len(newcomer)  # every query of the new file is a known query


def test_locus_is_stacked_with_the_artifacts_knn_router(workspace: Path, tmp_path: Path) -> None:
    import shutil

    from locus.errors import LocusArtifactError
    from locus.pipeline import load_workspace_locus

    assert (workspace / "artifacts" / "default" / "stacked.json").exists()
    with Store.open(workspace) as store:
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        stacked = router.router
        assert stacked.stack is not None and stacked.knn is not None
        embed_workspace_llms(store, ["law-3"])
        router.refresh()
        model = load_workspace_locus(store)
        phi = router.vectors_for(["court jury verdict appeal", "integral derivative limit"])
        proba = router.predict_proba(phi)
        facade = model.predict_proba(phi, list(router.llm_ids))
        column = list(router.llm_ids).index("law-3")
        # an LLM onboarded since the fit: LOCUS's P(correct) with the evidence quality of the
        # scores it was onboarded from (kept in the workspace for every process), and its own
        # scores joined to the votes (`StackedRouter.join`): a law specialist by its scores
        mean, count = store.evidence_means("default")["law-3"]
        assert count > 0 and 0.0 <= mean <= 1.0
        assert router.pool.evidence_means["law-3"] == (mean, count)
        assert np.isfinite(model.evidence_quality(["law-3"])).all()
        assert stacked.joined == {"law-3": count} and "law-3" in stacked.knn.llm_ids
        assert proba[0, column] > proba[1, column] + 0.3  # law over maths
        assert not np.allclose(proba[:, column], facade[:, column], atol=1e-3)
    # an artifact whose kNN part went missing is refused with a clear error
    copy = tmp_path / "ws"
    shutil.copytree(workspace, copy)
    shutil.rmtree(copy / "artifacts" / "default" / "knn")
    with Store.open(copy) as store, pytest.raises(LocusArtifactError, match="router"):
        WorkspaceRouter(store)


def _as_format_2(workspace: Path, copy: Path) -> dict:  # type: ignore[type-arg]
    """A copy of the workspace whose artifact is written as locus 0.x wrote it before
    stacked.json: the stack and the guard inside the metadata, format 2."""
    import json
    import shutil

    shutil.copytree(workspace, copy)
    folder = copy / "artifacts" / "default"
    parts = json.loads((folder / "stacked.json").read_text())
    (folder / "stacked.json").unlink()
    config = json.loads((folder / "config.json").read_text())
    config["format"] = "locus-artifact/2"
    config["metadata"]["guard"] = parts["guard"]
    config["metadata"]["ensemble"] = {"router": "knn", "folder": "knn", "stack": parts["stack"]}
    (folder / "config.json").write_text(json.dumps(config))
    return config


def test_an_artifact_of_the_previous_format_routes_exactly_as_before(
    workspace: Path, tmp_path: Path
) -> None:
    import json

    from locus.artifact import artifact_is_current
    from locus.errors import LocusArtifactError
    from locus.routing import load_router

    texts = ["court jury verdict appeal", "integral derivative limit", "cell protein enzyme"]
    with Store.open(workspace) as store:
        current = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        phi = current.vectors_for(texts)
        expected = current.predict_proba(phi)
        expected_guard = current.router.guard
    config = _as_format_2(workspace, tmp_path / "old")
    folder = tmp_path / "old" / "artifacts" / "default"
    assert artifact_is_current(workspace / "artifacts" / "default")
    assert not artifact_is_current(folder)
    with Store.open(tmp_path / "old") as store:
        old = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        np.testing.assert_array_equal(old.predict_proba(phi), expected)
        assert old.router.guard == expected_guard
        # the torch router of the same folder reads it the same way: its LOCUS part, stack and
        # guard (LLMs onboarded into the workspace since the fit, as another test of this
        # module does, join the votes in the workspace router only)
        torch_side = load_router(folder)
        assert isinstance(torch_side, StackedRouter)
        np.testing.assert_allclose(
            torch_side.locus.predict_logits(phi), old.router.locus.predict_logits(phi), atol=1e-4
        )
        assert torch_side.stack == old.router.stack and torch_side.guard is not None
        assert expected_guard is not None and torch_side.guard.margin == expected_guard.margin
        if not old.router.joined:
            np.testing.assert_allclose(torch_side.predict_proba(phi), expected, atol=1e-5)
    # the probability mixture of still earlier versions is refused, with what to do
    del config["metadata"]["ensemble"]["stack"]
    config["metadata"]["ensemble"]["weight"] = 0.3
    (folder / "config.json").write_text(json.dumps(config))
    with (
        Store.open(tmp_path / "old") as store,
        pytest.raises(LocusArtifactError, match="re-run `locus fit`"),
    ):
        WorkspaceRouter(store)


def test_without_the_ensemble_the_router_is_locus_alone(tmp_path: Path) -> None:
    from locus.pipeline import load_workspace_locus

    path = build_planted_workspace(tmp_path / "ws", planted_rows())
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=40), ensemble=False)
        router = WorkspaceRouter(store)
        assert router.router.stack is None and router.router.knn is None
        assert "ensemble" not in router.manifest.extra
        assert not (path / "artifacts" / "default" / "knn").exists()
        phi = router.vectors_for(["court jury verdict appeal"])
        np.testing.assert_allclose(
            router.predict_proba(phi), load_workspace_locus(store).predict_proba(phi), atol=1e-5
        )


def test_quality_and_budget_rules_end_to_end(workspace: Path) -> None:
    with Store.open(workspace) as store:
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        assert router.cost_model is not None  # the workspace has per-query costs
        math_text = ["integral derivative matrix limit polynomial"]
        expected = router.expected_costs(router.vectors_for(math_text))[0]
        by_llm = dict(zip(router.llm_ids, expected, strict=True))
        assert by_llm["math-0"] == pytest.approx(0.02) and by_llm["law-0"] == pytest.approx(0.001)
        # only the math group is likely right on a math query (0.9 against 0.2)
        strict = router.route_texts(math_text, quality=0.95)[0]
        assert strict.llm_id.startswith("math-") and strict.cost_usd == pytest.approx(0.02)
        loose = router.route_texts(math_text, quality=0.1)[0]
        assert not loose.llm_id.startswith("math-") and loose.cost_usd == pytest.approx(0.001)
        # a budget: the cost weight tuned on the fit's validation queries keeps them under it
        data = workspace_table(store)
        texts = [data.table.query_texts[i] for i in data.rows("test")]
        free = router.route_texts(texts, guarded=False)
        budget = 0.004  # a fifth of the math LLMs' price; a third of the queries are math
        weight = router.cost_weight_for_budget(budget)
        assert weight > 0
        tight = router.route_texts(texts, budget=budget)
        spent = float(np.mean([d.cost_usd for d in tight]))
        assert spent < float(np.mean([d.cost_usd for d in free]))
        assert spent <= budget * 1.5  # tuned on validation, re-checked here on test
        assert router.cost_weight_for_budget(budget) == weight  # cached
        with pytest.raises(LocusInputError, match="below the cheapest routing"):
            router.route_texts(texts, budget=0.0005)
        for bad in ({"budget": 0.0}, {"budget": -1.0}, {"quality": 1.2}, {"quality": -0.1}):
            with pytest.raises(LocusInputError, match="must"):
                router.route_texts(math_text, **bad)
        with pytest.raises(LocusInputError, match="choose one decision rule"):
            router.route_texts(math_text, quality=0.9, budget=0.01)


def test_per_query_costs_are_predicted_from_the_query(tmp_path: Path) -> None:
    rows = planted_rows()
    # every LLM pays 10x on law queries (long answers); math LLMs are dear everywhere
    base = np.where(rows["llm_id"].str.startswith("math-"), 0.02, 0.001)
    costs = base * np.where(rows["task"] == "law", 10.0, 1.0)
    path = build_planted_workspace(tmp_path / "ws", rows.assign(cost_usd=costs))
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=30))
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        law, bio = router.route_texts(
            ["court statute jury tort appeal", "cell enzyme gene protein membrane"], top=12
        )
    law_cost = {c.llm_id: c.cost_usd for c in law.ranked}
    bio_cost = {c.llm_id: c.cost_usd for c in bio.ranked}
    assert law_cost["biology-0"] == pytest.approx(0.01, rel=0.3)
    assert bio_cost["biology-0"] == pytest.approx(0.001, rel=0.3)
    assert law_cost["math-0"] == pytest.approx(0.2, rel=0.3)


def test_without_prices_the_cost_rules_say_what_is_missing(
    tmp_path: Path,
) -> None:
    path = build_planted_workspace(tmp_path / "ws")  # no costs at all
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=20))
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        assert router.cost_model is None and router.costs == {}
        with pytest.raises(LocusInputError, match="budget needs a cost for every candidate"):
            router.route_texts(["court jury"], budget=0.01)
        with pytest.raises(LocusInputError, match="quality needs each LLM's cost"):
            router.route_texts(["court jury"], quality=0.9)
        decision = router.route_texts(["court jury"])[0]  # accuracy routing needs no price
        assert decision.cost_usd is None
        # an artifact of an earlier version keeps no validation queries: a budget says so
        shutil.rmtree(path / "artifacts" / "default" / COST_FOLDER)
        older = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        with pytest.raises(LocusInputError, match="keeps no validation queries"):
            older.route_texts(["court jury"], budget=0.01)


def test_a_fit_past_the_graph_threshold_routes_through_its_saved_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from safetensors.numpy import load_file

    from locus.routing import ann

    path = build_planted_workspace(tmp_path / "ws")
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=30), ann_from=50)  # the planted: "many"
    assert "graph" in load_file(str(path / "artifacts" / "default" / "knn" / "arrays.safetensors"))
    built = []
    monkeypatch.setattr(ann.Graph, "build", classmethod(lambda cls, v: built.append(v)))
    with Store.open(path) as store:
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        phi = router.vectors_for(["court jury verdict appeal", "integral derivative limit"])
        knn = router.router.knn
        assert knn is not None and knn._graph() is not None and not built  # read, not rebuilt
        on_graph = router.predict_proba(phi)
        knn.search = "exact"
        np.testing.assert_allclose(router.predict_proba(phi), on_graph, atol=0.02)


def _token_catalog(path: Path) -> Path:
    """The README's llms.csv shape with per-token prices only: math-1 is the cheap maths LLM
    (1 / 2 USD per million tokens in / out) beside dear ones (10 / 30); the law and biology
    LLMs are the cheapest (0.1 / 0.2) and only 0.2 likely right on maths."""
    rows = ["llm_id,base_url,upstream_model,api_key_env,price_in_per_mtok,price_out_per_mtok"]
    for group in ("math", "law", "biology"):
        for i in range(4):
            price = (1, 2) if (group, i) == ("math", 1) else (10, 30) if group == "math" else (
                0.1, 0.2
            )  # fmt: skip
            rows.append(f"{group}-{i},,,,{price[0]},{price[1]}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_per_token_prices_give_per_query_costs(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    """`locus route --quality 0.95` after `locus import llms` of per-token prices (it failed:
    only cost_per_query counted): each LLM's cost on a query is its prompt, ~4 characters a
    token, and 256 completion tokens (its recorded answers' mean where there are some), and
    the cheaper LLM takes the query where its P(correct) is within the share of the best."""
    from locus.pipeline.llm_costs import DEFAULT_COMPLETION_TOKENS, DEFAULT_PROMPT_TOKENS
    from locus.store.references import ProbeAnswer

    path = build_planted_workspace(tmp_path / "ws")  # no costs
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=60))
    text = "integral derivative matrix limit polynomial"  # 43 characters: 11 tokens
    with Store.open(path) as store:
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        with pytest.raises(LocusInputError, match="`locus import llms`"):
            router.route_texts([text], quality=0.95)
    unpriced = run_cli("route", text, "-w", path, "--quality", "0.95")
    assert unpriced.exit_code == 2 and "`locus import llms`" in unpriced.stderr
    imported = run_cli("import", "llms", _token_catalog(tmp_path / "llms.csv"), "-w", path)
    assert imported.exit_code == 0, imported.stderr
    with Store.open(path) as store:
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        assert router.costs["math-0"] == pytest.approx(
            (DEFAULT_PROMPT_TOKENS * 10 + DEFAULT_COMPLETION_TOKENS * 30) / 1e6
        )
        # the four maths LLMs are planted alike; their fitted P(correct) differ by the noise
        # of their own maths scores (0.91-0.96 on this text), so the share asked is 0.9
        every = router.route_texts([text], top=12, quality=0.9)[0]
        cost = {c.llm_id: c.cost_usd for c in every.ranked}
        assert cost["math-1"] == pytest.approx((11 * 1 + 256 * 2) / 1e6)
        assert cost["math-0"] == pytest.approx((11 * 10 + 256 * 30) / 1e6)
        assert cost["law-0"] == pytest.approx((11 * 0.1 + 256 * 0.2) / 1e6)
        p_correct = {c.llm_id: c.p_correct for c in every.ranked}
        best = max(p_correct, key=p_correct.__getitem__)
        # the planted answer: every maths LLM is 0.9 right on maths, the others 0.2, so the
        # cheap maths LLM is within 90% of the best, and taken although it is not the best
        assert best.startswith("math-") and best != "math-1"
        assert p_correct["math-1"] >= 0.9 * p_correct[best]
        assert all(p < 0.9 * p_correct[best] for llm, p in p_correct.items() if "math" not in llm)
        assert every.llm_id == "math-1"
        assert router.route_texts([text], guarded=False)[0].llm_id == best  # accuracy alone
        loose = router.route_texts([text], quality=0.1)[0]  # the cheapest of all
        assert loose.llm_id.split("-")[0] in ("law", "biology")
        # a budget is tuned on the fit's validation queries (36), priced at the typical
        # prompt: accuracy routing spends 0.0024 a query there, 0.0002 keeps maths off the
        # dear maths LLMs (math-1 costs 0.00077 at 256 tokens; a third of them are maths)
        tight = router.route_texts([text], budget=0.0002)[0]
        assert tight.cost_usd is not None and tight.cost_usd < cost[best] / 10
        # recorded answers (locus onboard's probes) give the completion tokens
        for i, tokens in enumerate((80, 120)):
            store.put_probe_answer(
                ProbeAnswer("math-0", f"probe-{i}", "42", 1.0, completion_tokens=tokens)
            )
        router.refresh()
        assert router.token_prices["math-0"].completion_tokens == 100
        again = router.route_texts([text], top=12, quality=0.95)[0]
        assert {c.llm_id: c.cost_usd for c in again.ranked}["math-0"] == pytest.approx(
            (11 * 10 + 100 * 30) / 1e6
        )
    chosen = run_cli("route", text, "-w", path, "--quality", "0.9", "--json")
    assert chosen.exit_code == 0, chosen.stderr
    [decision] = chosen.json()  # type: ignore[misc]
    assert decision["llm_id"] == "math-1"
    assert decision["cost_usd"] == pytest.approx((11 * 1 + 256 * 2) / 1e6)


def test_a_fit_with_a_validation_split_reads_an_onboarded_llm_beside_the_pool(
    tmp_path: Path,
) -> None:
    """A pool with enough validation cells for the stack's own split: `locus fit` keeps the
    reading of a newcomer (`locus.routing.thin`); an LLM onboarded since with its hundreds of
    scores joins the votes and is read by the stack (the reading is for 16-128 scores)."""
    from locus.pipeline import load_workspace_locus

    rows = planted_rows(queries_per_task=400)
    path = build_planted_workspace(tmp_path / "ws", rows)
    with Store.open(path) as store:
        report = fit_workspace(store, small_config(max_steps=60), exclude_llms=["law-3"])
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        assert router.router.thin is not None and router.router.thin.sizes[0] == 16
        assert report.thin == router.router.thin.as_dict()  # `locus fit` says so
        assert load_workspace_locus(store).llm_ids_ == list(router.llm_ids)  # none added
        embed_workspace_llms(store, ["law-3"])
        router.refresh()
        stacked = router.router
        count = stacked.joined["law-3"]
        assert count > 128 and stacked.thin is not None and stacked.thin.share(count) == 0.0
        phi = router.vectors_for(["court jury verdict appeal", "integral derivative limit"])
        column = list(router.llm_ids).index("law-3")
        proba = router.predict_proba(phi)
        assert proba[0, column] > proba[1, column] + 0.3  # law over maths
        decisions = router.route_texts(["court jury verdict appeal statute"], top=1)
        assert decisions[0].llm_id.startswith("law-")
        # its first 64 training scores alone, as `locus onboard`'s probes would be: the fit's
        # rows hold the same queries, and the pool's scores on them say how easy they were
        data = workspace_table(store, split_seed=router.manifest.split_seed)
        column_scores = data.table.scores[:, data.table.llm_index("law-3")]
        train = data.rows("train")
        probes = train[~np.isnan(column_scores[train])][:64]
        tasks = [data.table.tasks[i] for i in probes]
        stacked.join("law-3", data.vectors[probes], column_scores[probes], tasks)
        assert stacked.thin.share(64) == 1.0 and stacked._fit_index is not None
        found = stacked._fit_index.find(unit_rows(data.vectors[probes]))
        assert (found >= 0).all()


def test_outcomes_of_an_llm_of_the_fit_move_its_votes_at_once(tmp_path: Path) -> None:
    """40 wrong outcomes of the law LLM routed to on new law texts: each is one more scored
    query of it, so its task vote's law rate is read from its law scores and the 40 zeros
    (smoothed as every rate is), its P(correct) on law falls, law goes to another LLM, and
    no other LLM's P(correct), nor its own on other tasks, moves by 0.05."""
    from locus.pipeline.workspace_router import OUTCOMES_SOURCE
    from locus.routing.task_vote import _PSEUDO
    from locus.text.cache import encode_missing

    rows = planted_rows()
    path = build_planted_workspace(tmp_path / "ws", rows)
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=100))
        router = WorkspaceRouter(store)
        law = [f"court statute contract jury appeal verdict case {i}" for i in range(60)]
        math = [f"integral derivative matrix limit vector case {i}" for i in range(60)]
        chosen = [d.llm_id for d in router.route_texts(law[40:], top=1)]
        assert all(llm.startswith("law-") for llm in chosen), chosen
        swapped = max(set(chosen), key=chosen.count)  # the one most law texts went to
        ids = list(router.llm_ids)
        column = ids.index(swapped)
        p_law = router.predict_proba(router.vectors_for(law[40:]))
        p_math = router.predict_proba(router.vectors_for(math))
        knn = router.router.knn
        assert knn is not None and knn.task_vote_ is not None
        vote = knn.task_vote_
        law_row = vote.names.index("law")
        own = knn.scores_[:, knn.llm_ids.index(swapped)]
        on_law = (vote.codes[: len(own)] == law_row) & ~np.isnan(own)
        frame = pd.DataFrame(
            {"llm_id": swapped, "query_id": [f"o{i}" for i in range(40)],
             "query_text": law[:40], "score": 0.0}
        )  # fmt: skip
        batch = ImportBatch.from_long(frame, source=OUTCOMES_SOURCE, origin="outcomes")
        store.write_batch(batch, kind="table")
        encode_missing(store, HashingEncoder(ENCODER_DIM))
        router.refresh()
        # the weight a test can state: one zero per outcome query beside its law scores,
        # smoothed as before (the test's hashing encoder maps a few of the 40 texts to one
        # vector: one query, one row)
        posted = len(np.unique(unit_rows(router.vectors_for(law[:40])), axis=0))
        mean = float(np.nanmean(np.concatenate([own[~np.isnan(own)], np.zeros(posted)])))
        expected = (own[on_law].sum() + _PSEUDO * mean) / (on_law.sum() + posted + _PSEUDO)
        rates = knn.task_vote_.rates
        assert rates[law_row, knn.llm_ids.index(swapped)] == pytest.approx(expected, rel=1e-5)
        after_law = router.predict_proba(router.vectors_for(law[40:]))
        after_math = router.predict_proba(router.vectors_for(math))
        # it falls by 0.20-0.21 (fits on two installs of one machine: 0.197 at the least), while
        # no other P(correct) moves by 0.05
        assert (after_law[:, column] < p_law[:, column] - 0.15).all()
        assert {d.llm_id for d in router.route_texts(law[40:], top=1)} & {swapped} == set()
        others = [i for i in range(len(ids)) if i != column]
        assert np.abs(after_law[:, others] - p_law[:, others]).max() < 0.05
        assert np.abs(after_math - p_math).max() < 0.05
        # posted again (the same texts): read once, not twice
        router.refresh()
        assert knn.task_vote_.rates[law_row, knn.llm_ids.index(swapped)] == pytest.approx(
            expected, rel=1e-5
        )


def post_outcomes(store: Store, texts: list[str], score: float, first: int) -> None:
    """Store law-0's outcomes `score` on `texts` (ids o<first>...), as POST /v1/outcomes
    does, and encode them."""
    from locus.pipeline.workspace_router import OUTCOMES_SOURCE
    from locus.text.cache import encode_missing

    frame = pd.DataFrame({"llm_id": "law-0", "query_text": texts, "score": score})
    frame["query_id"] = [f"o{first + i}" for i in range(len(texts))]
    batch = ImportBatch.from_long(frame, source=OUTCOMES_SOURCE, origin="outcomes")
    store.write_batch(batch, kind="table")
    encode_missing(store, HashingEncoder(ENCODER_DIM))


def test_a_discounted_llm_is_read_from_its_outcomes_since_the_change(tmp_path: Path) -> None:
    """On an alarm the gateway discounts an LLM with the drift test's count of outcomes since
    the change began: its evidence of the fit and its outcomes from before the change leave
    its votes; the outcomes since, and any posted later, are read."""

    path = build_planted_workspace(tmp_path / "ws", planted_rows())
    law = [f"court statute contract jury appeal verdict case {i}" for i in range(50)]

    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=40))
        router = WorkspaceRouter(store)
        post_outcomes(store, law[:30], 1.0, 0)  # right before the change
        post_outcomes(store, law[30:40], 0.0, 30)  # wrong since
        router.refresh()
        knn = router.router.knn
        assert knn is not None
        column = knn.llm_ids.index("law-0")
        assert int((~np.isnan(knn.scores_[:, column])).sum()) > 40  # the fit's and outcomes
        router.discount("law-0", since_change=10)
        router.refresh()
        column_scores = knn.scores_[:, column]
        kept = column_scores[~np.isnan(column_scores)]
        # the 10 since the change, all wrong (the test's 48-d hashing encoder maps a few
        # texts to one vector, one row); the 30 right ones before it, and the fit's, gone
        assert 8 <= len(kept) <= 10 and (kept == 0).all()
        post_outcomes(store, law[40:], 0.0, 40)  # posted after the alarm: read too
        router.refresh()
        column_scores = knn.scores_[:, column]
        later = column_scores[~np.isnan(column_scores)]
        assert len(later) > len(kept) and (later == 0).all()


def test_locus_outcomes_replays_the_drift_test(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    """`locus outcomes`: the stored outcomes, in their order, against the fit's P(correct):
    an LLM of the fit right on law planted at 0.9, now wrong 30 times, raises its alarm after
    about 10; another's right answers raise none."""
    from locus.pipeline.workspace_router import OUTCOMES_SOURCE
    from locus.text.cache import encode_missing

    path = build_planted_workspace(tmp_path / "ws", planted_rows())
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=100))
        assert run_cli("outcomes", "-w", path, "--json").json()["outcomes"] == 0
        law = [f"court statute contract jury appeal verdict case {i}" for i in range(30)]
        frame = pd.concat(
            [
                pd.DataFrame({"llm_id": "law-0", "query_text": law, "score": 0.0}),
                pd.DataFrame({"llm_id": "law-1", "query_text": law, "score": 1.0}),
            ]
        ).assign(query_id=lambda f: [f"o{i}" for i in range(len(f))])
        batch = ImportBatch.from_long(frame, source=OUTCOMES_SOURCE, origin="outcomes")
        store.write_batch(batch, kind="table")
        encode_missing(store, HashingEncoder(ENCODER_DIM))
    shown = run_cli("outcomes", "-w", path, "--json").json()
    assert shown["outcomes"] == 60 and shown["alarms"] == ["law-0"]  # type: ignore[index]
    zero = shown["llms"]["law-0"]  # type: ignore[index]
    assert zero["rate"] == 0.0 and zero["predicted"] > 0.8 and 5 <= zero["alarm_at"] <= 15
    assert not shown["llms"]["law-1"]["alarm"]  # type: ignore[index]
    table = run_cli("outcomes", "-w", path)
    assert table.exit_code == 0 and "ALARM" in table.stdout and "drift alarm: law-0" in table.stdout


def test_outcomes_older_than_the_max_age_leave_the_votes(tmp_path: Path) -> None:
    """With `outcome_max_age_s`, an outcome stored longer ago than it leaves its LLM's votes at
    the next read: 30 wrong law outcomes move law-0's P(correct) on law; once they are 30 days
    old (a week's window) it is back where the fit had it, and a fresh outcome is read alone.
    Without the limit, the old outcomes keep counting."""
    import sqlite3
    from datetime import UTC, datetime, timedelta

    from locus.pipeline.workspace_router import OUTCOMES_SOURCE

    path = build_planted_workspace(tmp_path / "ws", planted_rows())
    law = [f"court statute contract jury appeal verdict case {i}" for i in range(50)]

    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=40))
        week = 7 * 86_400.0
        router = WorkspaceRouter(store, outcome_max_age_s=week)
        ageless = WorkspaceRouter(store)
        knn = router.router.knn
        assert knn is not None
        column = knn.llm_ids.index("law-0")
        fitted = int((~np.isnan(knn.scores_[:, column])).sum())
        asked = router.vectors_for(law[40:])
        before = router.predict_proba(asked)[:, column]
        post_outcomes(store, law[:30], 0.0, 0)
        router.refresh()
        ageless.refresh()
        moved = router.predict_proba(asked)[:, column]
        assert (moved < before - 0.1).all()
        assert int((~np.isnan(knn.scores_[:, column])).sum()) > fitted + 20
        old = (datetime.now(UTC) - timedelta(days=30)).isoformat(timespec="seconds")
        with sqlite3.connect(path / "locus.db") as conn:
            conn.execute(
                "UPDATE scores SET imported_at = ? WHERE source = ?", (old, OUTCOMES_SOURCE)
            )
        router.refresh()
        ageless.refresh()
        assert int((~np.isnan(knn.scores_[:, column])).sum()) == fitted
        # back within 0.005 (their rows stay in the neighbour index, unscored, and move the
        # other votes' neighbours a little), where the outcomes had moved it by over 0.1
        np.testing.assert_allclose(router.predict_proba(asked)[:, column], before, atol=5e-3)
        np.testing.assert_allclose(ageless.predict_proba(asked)[:, column], moved, atol=1e-5)
        post_outcomes(store, law[30:40], 1.0, 30)  # a fresh outcome: read, the old ones stay out
        router.refresh()
        column_scores = knn.scores_[:, column]
        assert fitted < int((~np.isnan(column_scores)).sum()) <= fitted + 10
        with pytest.raises(LocusInputError, match="outcome_max_age_s"):
            WorkspaceRouter(store, outcome_max_age_s=0)
