"""`locus onboard`: probes asked of a real endpoint on 127.0.0.1 that answers as a known LLM of
the pool, graded, imported, embedded; placed next to that LLM; resumable; every failure one
clear line with nothing half-written."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.data.llm_catalog import Endpoint
from locus.errors import LocusInputError
from locus.pipeline.onboard import onboard_llm
from locus.store import Store
from tests.conftest import CliResult
from tests.fake_llm_endpoint import impersonating
from tests.planted_workspace import build_planted_workspace, planted_rows

OPTIONS = "\nA. the first\nB. the second\nC. the third\nD. the fourth"
TWIN = "math-0"  # the LLM the fake endpoint answers as


def _mc_rows() -> pd.DataFrame:
    """The planted pool as multiple-choice questions with a reference letter each."""
    rows = planted_rows()
    rng = np.random.default_rng(5)
    letters = {q: "ABCD"[rng.integers(4)] for q in rows["query_id"].unique()}
    return rows.assign(
        query_text=rows["query_text"] + OPTIONS, reference=rows["query_id"].map(letters)
    )


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from locus.pipeline import fit_workspace
    from tests.nn.conftest import small_config

    path = build_planted_workspace(tmp_path_factory.mktemp("onboard") / "ws", _mc_rows())
    with Store.open(path) as store:
        fit_workspace(store, small_config())
    return Path(path)


@pytest.fixture
def ws(fitted: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ws"
    shutil.copytree(fitted, copy)
    return copy


def _truth(path: Path, llm_id: str = TWIN) -> dict[str, tuple[str, bool]]:
    """Query text -> (reference letter, whether `llm_id` was right), as stored."""
    with Store.open(path) as store:
        table = store.score_table()
        references = store.references()
    column = table.scores[:, table.llm_index(llm_id)]
    return {
        str(text): (references[h].answer, bool(score > 0.5))
        for text, h, score in zip(table.query_texts, table.text_hashes, column, strict=True)
        if h in references
    }


def test_onboarding_places_the_endpoint_next_to_the_llm_it_answers_as(ws: Path) -> None:
    with impersonating(_truth(ws), unreadable_every=11) as fake, Store.open(ws) as store:
        report = onboard_llm(store, "clone", Endpoint(fake.base_url, fake.model), n=32)
        assert fake.requests == 32 and report.asked == 32 and report.reused == 0
        # every probe carries its grader's instruction, then the query
        assert "The answer is (X)" in fake.bodies[0]["messages"][0]["content"]
        assert report.graded + report.ungradable == 32 and report.ungradable == 2
        assert report.ungradable_examples[0].startswith("I am not able")
        # the nearest LLM is one of the twin's group (same skills), not another group's
        assert report.nearest[0]["llm_id"].startswith("math-")
        # predicted accuracy per task near the twin's (0.9 on math, 0.2 elsewhere)
        predicted = {row["task"]: row["predicted"] for row in report.per_task}
        assert predicted["math"] > 0.65 and predicted["law"] < 0.45
        assert predicted["biology"] < 0.45
        assert report.prompt_tokens == 100 * 32 and report.cost_usd is None
        # its probes beside the guard's default's scores on the same queries, as stored
        paired = report.beside_default
        assert paired is not None and paired["llm_id"] != "clone"
        both = store.score_table(llm_ids=["clone", paired["llm_id"]]).scores
        both = both[~np.isnan(both).any(axis=1)]
        assert paired["probes"] == len(both) == report.graded
        assert paired["gain"] == pytest.approx(float((both[:, 0] - both[:, 1]).mean()))
        assert paired["beyond_noise"] == (abs(paired["gain"]) > 2 * paired["se"] > 0)
        # the LLM is in the pool, scored from its own source, with its endpoint recorded
        assert "onboard:clone" in set(store.sources()["name"])
        assert int(store.score_table(llm_ids=["clone"]).observed.sum()) == report.graded
        assert Endpoint.from_json(store.llm_metadata()["clone"]["endpoint"]) == Endpoint(
            fake.base_url, fake.model
        )


def test_unreadable_answers_can_count_as_wrong(ws: Path) -> None:
    with impersonating(_truth(ws), unreadable_every=4) as fake, Store.open(ws) as store:
        report = onboard_llm(
            store, "clone", Endpoint(fake.base_url, fake.model), n=16, unreadable="wrong"
        )
        assert report.ungradable == 4 and report.graded == 16
        table = store.score_table(llm_ids=["clone"])
        assert int(table.observed.sum()) == 16
        with pytest.raises(LocusInputError, match="unreadable must be skip or wrong"):
            onboard_llm(store, "x", Endpoint(fake.base_url, fake.model), unreadable="zero")


def test_a_crash_halfway_loses_no_answer_and_a_rerun_asks_only_the_rest(ws: Path) -> None:
    truth = _truth(ws)
    endpoint_of = lambda fake: Endpoint(fake.base_url, fake.model)  # noqa: E731
    with impersonating(truth, fail_after=10) as failing, Store.open(ws) as store:
        before = store.counts()
        # 10 answered of 24: below MIN_ANSWERED_PROBES, so nothing is placed
        with pytest.raises(LocusInputError) as caught:
            onboard_llm(store, "clone", endpoint_of(failing), n=24, retries=0)
        assert str(caught.value) == (
            "onboard clone: placed nothing: only 10 of 24 probes were answered (14 failed "
            "after retries, e.g. HTTP 503: overloaded after 1 attempts); expected at least 16 "
            "answered to place an LLM; the 10 answers received are kept: run the same command "
            "again (same --n, --strategy and --seed) when the endpoint is healthy and it asks "
            "only the 14 missing"
        )
        assert store.counts() == before  # no scores, no embedding
        assert "clone" not in store.embeddings("default")[0]
        assert len(store.probe_answers("clone")) == 10
    with impersonating(truth) as healthy, Store.open(ws) as store:
        again = onboard_llm(store, "clone", endpoint_of(healthy), n=24)
        assert healthy.requests == 14 and again.reused == 10 and again.asked == 14
        assert again.graded == 24 and not again.failed
        # more probes later: only the new ones are asked
        more = onboard_llm(store, "clone", endpoint_of(healthy), n=30)
        assert healthy.requests == 20 and more.reused == 24
        assert int(store.score_table(llm_ids=["clone"]).observed.sum()) == 30


def test_every_failure_is_one_clear_line_and_imports_nothing(ws: Path, tmp_path: Path) -> None:
    truth = _truth(ws)
    with Store.open(ws) as store:
        before = store.counts()
        with impersonating(truth, key="sekret") as fake:
            with pytest.raises(LocusInputError, match=r"refused the API key .HTTP 401"):
                onboard_llm(store, "x", Endpoint(fake.base_url, fake.model), api_key="wrong")
            with pytest.raises(LocusInputError, match=r"does not serve model 'gpt-9'.*clone-1"):
                onboard_llm(store, "x", Endpoint(fake.base_url, "gpt-9"), api_key="sekret")
            port = fake.base_url
        with pytest.raises(LocusInputError, match="is unreachable"):
            onboard_llm(store, "x", Endpoint(port, "clone-1"))
        with (
            impersonating(truth, unreadable_every=1) as mute,
            pytest.raises(LocusInputError, match=r"only 0 of 8 .*8 answers no grader"),
        ):
            onboard_llm(store, "x", Endpoint(mute.base_url, mute.model), n=8)
        assert store.counts() == before  # nothing imported
        assert len(store.probe_answers("x")) == 8  # but the answers are kept
    bare = build_planted_workspace(tmp_path / "bare")
    with Store.open(bare) as store:
        from locus.pipeline import fit_workspace
        from tests.nn.conftest import small_config

        fit_workspace(store, small_config(max_steps=50))
        with pytest.raises(LocusInputError, match=r"no reference answers.*locus import mmlu-pro"):
            onboard_llm(store, "x", Endpoint("http://127.0.0.1:9/v1", "m"))


def test_a_partly_failing_endpoint_says_what_it_was_placed_from_and_exits_1(
    ws: Path, run_cli: Callable[..., CliResult]
) -> None:
    truth = _truth(ws)
    with impersonating(truth, fail_after=20, max_requests=100) as fake:
        command = (
            "onboard", "clone", "--endpoint", fake.base_url, "--model", fake.model,
            "--n", "24", "--retries", "0", "-w", ws,
        )  # fmt: skip
        result = run_cli(*command, "--json")
        assert result.exit_code == 1, result.stderr
        report = result.json()
        assert isinstance(report, dict)
        assert report["summary"] == (
            f"placed clone (clone-1 at {fake.base_url}) from 20 of 24 probes; 4 failed after "
            "retries (run the same command again to ask them)"
        )
        assert (report["graded"], report["failed_probes"], report["complete"]) == (20, 4, False)
        with Store.open(ws) as store:  # placed from the 20 answered
            assert int(store.score_table(llm_ids=["clone"]).observed.sum()) == 20
            assert "clone" in store.embeddings("default")[0]
        again = run_cli(*command)  # the endpoint still fails: the 4 are asked and fail again
        assert again.exit_code == 1
        assert " ".join(again.stdout.split()).startswith(  # first, however the terminal wraps
            f"placed clone (clone-1 at {fake.base_url}) from 20 of 24 probes; 4 failed after "
            "retries (run the same command again to ask them)"
        )
        # the probes' accuracy with its binomial standard error over the 20 graded
        said = " ".join(again.stdout.split()).split(" right on its probes")[0].split(" s: ")[-1]
        shown, spread = (float(part) for part in said.split(" ± "))
        assert spread == pytest.approx((shown * (1 - shown) / 20) ** 0.5, abs=2e-3)
        assert fake.requests == 28
    with Store.open(ws) as store:
        before = store.counts()
    with impersonating(truth, fail_after=5, max_requests=100) as mostly_failing:
        refused = run_cli(
            "onboard", "weak", "--endpoint", mostly_failing.base_url, "--model", "clone-1",
            "--n", "24", "--retries", "0", "-w", ws,
        )  # fmt: skip
        assert refused.exit_code == 2
        assert refused.stderr.startswith(
            "error: onboard weak: placed nothing: only 5 of 24 probes were answered (19 failed"
        )
        assert "at least 16 answered" in refused.stderr
        assert "run the same command again" in refused.stderr and refused.stdout == ""
    with Store.open(ws) as store:
        assert store.counts() == before and "weak" not in store.embeddings("default")[0]
    with impersonating(truth, max_requests=100) as healthy:
        resumed = run_cli(
            "onboard", "weak", "--endpoint", healthy.base_url, "--model", "clone-1",
            "--n", "24", "--retries", "0", "-w", ws, "--json",
        )  # fmt: skip
        assert resumed.exit_code == 0, resumed.stderr
        assert healthy.requests == 19  # only the missing ones
        assert resumed.json()["summary"] == (  # type: ignore[index]
            f"placed weak (clone-1 at {healthy.base_url}) from 24 of 24 probes"
        )
    from locus.cli.onboard_commands import PARTIAL_EXIT_CODE, onboard_command
    from locus.pipeline.onboard import MIN_ANSWERED_PROBES

    said = " ".join((onboard_command.__doc__ or "").split())  # --help states the exit codes
    assert f"{PARTIAL_EXIT_CODE} placed, but some probes failed after their retries" in said
    assert f"2 nothing placed, e.g. fewer than {MIN_ANSWERED_PROBES} probes answered" in said


def test_the_onboard_command(ws: Path, run_cli: Callable[..., CliResult]) -> None:
    with impersonating(_truth(ws)) as fake:
        result = run_cli(
            "onboard", "clone", "--endpoint", fake.base_url, "--model", fake.model,
            "--n", "16", "-w", ws, "--json",
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        report = result.json()
        assert report["graded"] == 16 and report["nearest"][0]["llm_id"].startswith("math-")
        text = run_cli(
            "onboard", "clone", "--endpoint", fake.base_url, "--model", fake.model,
            "--n", "16", "-w", ws,
        )  # fmt: skip
        assert text.exit_code == 0, text.stderr
        assert "16 reused" in text.stdout and "nearest" in text.stdout
        assert "beside the router's default" in text.stdout
        assert report["beside_default"]["probes"] == 16
        assert fake.requests == 16  # the second run asked nothing
        bad = run_cli(
            "onboard", "y", "--endpoint", fake.base_url, "--model", "nope", "-w", ws
        )  # fmt: skip
        assert bad.exit_code == 2 and "does not serve model 'nope'" in bad.stderr


def test_the_service_onboards_an_endpoint_in_the_background(
    ws: Path, run_cli: Callable[..., CliResult], uvicorn_server: Callable[[object], str]
) -> None:
    import time

    import httpx

    from locus.server.app import build_app

    key = run_cli("keys", "create", "onboarder", "-w", ws, "--json").json()
    assert isinstance(key, dict)
    auth = {"authorization": f"Bearer {key['key']}"}
    with impersonating(_truth(ws)) as fake, Store.open(ws, create=False) as store:
        base = uvicorn_server(build_app(store))
        with httpx.Client(base_url=base, timeout=30, headers=auth) as client:
            body = {"base_url": fake.base_url, "model": fake.model, "n": 16}
            assert httpx.post(f"{base}/v1/llms/clone/onboard", json=body).status_code == 401
            for bad, words in (
                ({"base_url": "ftp://x"}, "http(s) URL"),
                ({**body, "api_key": "sk-1"}, "unknown field 'api_key'"),
                ({**body, "n": 0}, "n must be an integer"),
            ):
                answer = client.post("/v1/llms/clone/onboard", json=bad)
                assert answer.status_code == 400 and words in answer.text, answer.text
            missing = client.get("/v1/llms/clone/onboard")
            assert missing.status_code == 404
            started = client.post("/v1/llms/clone/onboard", json=body)
            assert started.status_code == 202 and started.json()["status"] == "running"
            deadline = time.monotonic() + 60
            status = started.json()
            while status["status"] == "running" and time.monotonic() < deadline:
                time.sleep(0.2)
                status = client.get("/v1/llms/clone/onboard").json()
            assert status["status"] == "done", status
            assert status["asked"] == status["total"] == 16
            assert status["report"]["graded"] == 16
            assert status["report"]["nearest"][0]["llm_id"].startswith("math-")
            # the next request can route to it, and the gateway knows its endpoint
            ranked = client.post("/v1/route", json={"text": "integral matrix"}).json()
            assert "clone" in ranked["fallback_order"], ranked
            upstreams = client.get("/v1/upstreams").json()
            assert "clone" in str(upstreams)
            # a failing job says why
            failing = client.post("/v1/llms/other/onboard", json={**body, "model": "not-served"})
            assert failing.status_code == 202
            while client.get("/v1/llms/other/onboard").json()["status"] == "running":
                time.sleep(0.1)
            failed = client.get("/v1/llms/other/onboard").json()
            assert failed["status"] == "failed" and "does not serve model" in failed["error"]
