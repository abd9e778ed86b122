"""The service over a trained planted workspace: catalog endpoints, the real router, a real
uvicorn server on 127.0.0.1, and `locus serve`'s refusals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.pipeline.workspace_router import WorkspaceRouter
from locus.server.app import build_app
from locus.store import Store
from tests.conftest import CliResult
from tests.planted_workspace import trained_planted_workspace
from tests.server.fakes import fake_upstreams

Run = Callable[..., CliResult]
SERVED = ("math-0", "law-0", "biology-0")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_planted_workspace(tmp_path_factory.mktemp("service") / "ws")


def _catalog(tmp_path: Path, port: int) -> Path:
    rows = ["llm_id,base_url,upstream_model,cost_per_query"] + [
        f"{llm},http://127.0.0.1:{port}/{llm}/v1,model-{llm},0.001" for llm in SERVED
    ]
    path = tmp_path / "llms.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_the_service_routes_and_answers_over_real_http(
    trained: Path, tmp_path: Path, run_cli: Run, uvicorn_server: Callable[[object], str]
) -> None:
    with fake_upstreams({llm: ["ok"] for llm in SERVED}) as fake:
        imported = run_cli("import", "llms", _catalog(tmp_path, fake.port), "-w", trained)
        assert imported.exit_code == 0, imported.stderr
        with Store.open(trained, create=False) as store:
            base = uvicorn_server(build_app(store, auth=False))
            with httpx.Client(base_url=base, timeout=10) as client:
                assert client.get("/health").json() == {"status": "ok"}
                routed = client.post(
                    "/v1/route", json={"text": "integral derivative matrix limit vector"}
                ).json()
                assert routed["llm_id"].startswith("math-")
                assert len(routed["fallback_order"]) == 12
                answer = client.post(
                    "/v1/chat/completions",
                    json={
                        "model": "locus",
                        "messages": [{"role": "user", "content": "court tort jury verdict appeal"}],
                    },
                )
                assert answer.status_code == 200, answer.text
                llm = answer.headers["x-locus-llm"]
                assert llm in SERVED and answer.json()["model"] == f"model-{llm}"  # upstream's
                assert answer.headers["x-locus-upstream-model"] == f"model-{llm}"
                assert fake.bodies[llm][0]["model"] == f"model-{llm}"
                assert answer.headers["x-locus-cost-usd"] == "0.00100000"
                models = [m["id"] for m in client.get("/v1/models").json()["data"]]
                # every LLM with an endpoint is priced (0.001 a query): the cost rules, a
                # budget of their mean; only the LLMs the gateway serves (math-3 has none)
                assert models[:4] == [
                    "locus", "locus:quality=0.95", "locus:budget=0.001", "locus:cost=10"
                ]  # fmt: skip
                assert sorted(models[4:]) == sorted(SERVED)
                # a cost rule through the real router: only the priced LLMs with an endpoint
                # are weighed; the answer says what the router predicted for it
                for model in ("locus:quality=0.9", "locus:budget=0.001", "locus:cost=10"):
                    priced = client.post(
                        "/v1/chat/completions",
                        json={"model": model, "messages": [{"role": "user", "content": "cell"}]},
                    )
                    assert priced.status_code == 200, (model, priced.text)
                    assert priced.headers["x-locus-llm"] in SERVED
                    assert 0 < float(priced.headers["x-locus-p-correct"]) <= 1
                    assert 0 < float(priced.headers["x-locus-p-correct-sd"]) < 0.5
                    assert float(priced.headers["x-locus-expected-cost-usd"]) == 0.001
                routed = client.post("/v1/route", json={"text": "cell enzyme", "top": 3}).json()
                assert 0 < routed["uncertainty"] < 0.5
                assert all(0 < c["uncertainty"] < 0.5 for c in routed["ranked"])
                too_low = client.post("/v1/route", json={"text": "cell enzyme", "quality": 1.5})
                assert too_low.status_code == 400 and "[0, 1]" in too_low.text
                # a text that gives no task away, its task given: that task's specialists
                plain = "please answer this question for me"
                for task in ("math", "law"):
                    told = client.post("/v1/route", json={"text": plain, "task": task})
                    assert told.status_code == 200, told.text
                    assert told.json()["llm_id"].startswith(f"{task}-")
                typo = client.post("/v1/route", json={"text": plain, "task": "lwa"})
                assert typo.status_code == 400 and "did you mean 'law'" in typo.text
                empty = client.post("/v1/route", json={"text": plain, "task": 3})
                assert empty.status_code == 400 and "task: expected a task name" in empty.text
                # the gateway takes it too (the OpenAI SDK's extra_body), never sent upstream
                for task, llm in (("math", "math-0"), ("law", "law-0")):
                    told = client.post(
                        "/v1/chat/completions",
                        json={
                            "model": "locus",
                            "messages": [{"role": "user", "content": plain}],
                            "task": task,
                        },
                    )
                    assert told.status_code == 200, told.text
                    assert told.headers["x-locus-llm"] == llm
                    assert "task" not in fake.bodies[llm][-1]
                typo = client.post(
                    "/v1/chat/completions",
                    json={"model": "locus", "messages": [{"role": "user", "content": plain}],
                          "task": "lwa"},
                )  # fmt: skip
                assert typo.status_code == 400 and "did you mean 'law'" in typo.text


def test_the_gateways_cost_rules_price_llms_by_their_tokens(
    tmp_path: Path, run_cli: Run, uvicorn_server: Callable[[object], str]
) -> None:
    """A catalog with per-token prices only (the README's llms.csv): the gateway lists and
    takes its cost rules, each LLM costing its prompt (~4 characters a token) and 256
    completion tokens; the cheap maths LLM answers a maths query under quality=0.95."""
    from locus.pipeline import fit_workspace
    from tests.nn.conftest import small_config
    from tests.planted_workspace import build_planted_workspace

    path = build_planted_workspace(tmp_path / "ws")
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=60))
    served = {"math-0": (10, 30), "math-1": (1, 2), "law-0": (0.1, 0.2)}
    with fake_upstreams({llm: ["ok"] for llm in served}) as fake:
        rows = ["llm_id,base_url,upstream_model,api_key_env,price_in_per_mtok,price_out_per_mtok"]
        rows += [
            f"{llm},http://127.0.0.1:{fake.port}/{llm}/v1,model-{llm},,{price_in},{price_out}"
            for llm, (price_in, price_out) in served.items()
        ]
        catalog = tmp_path / "llms.csv"
        catalog.write_text("\n".join(rows) + "\n", encoding="utf-8")
        assert run_cli("import", "llms", catalog, "-w", path).exit_code == 0
        with Store.open(path, create=False) as store:
            base = uvicorn_server(build_app(store, auth=False))
            with httpx.Client(base_url=base, timeout=20) as client:
                models = [m["id"] for m in client.get("/v1/models").json()["data"]]
                assert models[1] == "locus:quality=0.95" and models[2].startswith("locus:budget=")
                text = "integral derivative matrix limit polynomial"  # 11 tokens
                answer = client.post(
                    "/v1/chat/completions",
                    json={
                        "model": "locus:quality=0.95",
                        "messages": [{"role": "user", "content": text}],
                    },
                )
                assert answer.status_code == 200, answer.text
                assert answer.headers["x-locus-llm"] == "math-1"
                expected = float(answer.headers["x-locus-expected-cost-usd"])
                assert expected == pytest.approx((11 * 1 + 256 * 2) / 1e6)
                # the answer's own cost: the fake upstream's usage, 1000 in and 500 out
                assert float(answer.headers["x-locus-cost-usd"]) == pytest.approx(0.002)


def test_serve_refuses_no_auth_off_loopback(trained: Path, run_cli: Run) -> None:
    exposed = run_cli("serve", "--no-auth", "--host", "0.0.0.0", "-w", trained)
    assert exposed.exit_code == 2 and "loopback" in exposed.stderr
    missing = run_cli("serve", "--no-auth", "-w", trained, "--artifact", "nope")
    assert missing.exit_code == 2 and "no trained artifact 'nope'" in missing.stderr


def test_api_keys_guard_every_v1_request(
    trained: Path, run_cli: Run, uvicorn_server: Callable[[object], str]
) -> None:
    made = run_cli("keys", "create", "ci-bot", "-w", trained, "--json").json()
    assert isinstance(made, dict) and made["key"].startswith("lk-")
    with Store.open(trained, create=False) as store:
        assert made["key"] not in str(store.list_keys())  # only its hash is kept
        base = uvicorn_server(build_app(store))
        route = {"text": "court tort jury"}
        with httpx.Client(base_url=base, timeout=10) as client:
            assert client.get("/health").status_code == 200  # liveness needs no key
            missing = client.post("/v1/route", json=route)
            assert missing.status_code == 401 and "missing API key" in missing.text
            wrong = client.post("/v1/route", json=route, headers={"authorization": "Bearer lk-x"})
            assert wrong.status_code == 401
            good = {"authorization": f"Bearer {made['key']}"}
            assert client.post("/v1/route", json=route, headers=good).status_code == 200
            assert run_cli("keys", "revoke", made["id"], "-w", trained).exit_code == 0
            revoked = client.post("/v1/route", json=route, headers=good)
            assert revoked.status_code == 401 and "revoked" in revoked.text
    listed = run_cli("keys", "list", "-w", trained, "--json").json()
    assert isinstance(listed, list) and listed[0]["revoked_at"] is not None
    unknown = run_cli("keys", "revoke", "nope", "-w", trained)
    assert unknown.exit_code != 0 and "no API key 'nope'" in unknown.stderr


def test_posted_scores_onboard_an_llm_live(
    trained: Path, run_cli: Run, uvicorn_server: Callable[[object], str]
) -> None:
    from tests.planted_workspace import planted_rows

    rows = planted_rows()
    mine = rows[rows["llm_id"] == "math-1"].sample(150, random_state=1)
    scores = [
        {"query_text": t, "score": s}
        for t, s in zip(mine["query_text"], mine["score"], strict=True)
    ]
    key = run_cli("keys", "create", "onboarder", "-w", trained, "--json").json()
    assert isinstance(key, dict)
    auth = {"authorization": f"Bearer {key['key']}"}
    with Store.open(trained, create=False) as store:
        base = uvicorn_server(build_app(store))
        with httpx.Client(base_url=base, timeout=60, headers=auth) as client:
            bad = client.post(
                "/v1/llms/fresh/scores", json={"scores": [{"query_text": "x", "score": 1.5}]}
            )
            assert bad.status_code == 400 and "expected a number in [0, 1]" in bad.text
            assert client.post("/v1/llms/fresh/scores", json={"scores": []}).status_code == 400
            posted = client.post("/v1/llms/fresh/scores", json={"scores": scores})
            assert posted.status_code == 200, posted.text
            report = posted.json()
            assert report["embedding"]["new"] is True and report["new_scores"] > 100
            routed = client.post(
                "/v1/route", json={"text": "integral derivative", "top": 12}
            ).json()
            assert "fresh" in [c["llm_id"] for c in routed["ranked"]] + routed["fallback_order"]
            again = client.post("/v1/llms/fresh/scores", json={"scores": scores[:20]}).json()
            assert again["embedding"]["new"] is False and again["new_scores"] == 0
    with Store.open(trained, create=False) as store:
        assert "fresh" in store.llm_ids()  # kept in the store
        ids, _, _ = store.embeddings("default")
        assert "fresh" in ids


def test_the_openai_client_talks_to_the_gateway(
    trained: Path, tmp_path: Path, run_cli: Run, uvicorn_server: Callable[[object], str]
) -> None:
    """The official client, pointed at locus serve: a completion and a stream."""
    openai = pytest.importorskip("openai")
    with fake_upstreams({llm: ["ok"] for llm in SERVED}) as fake:
        assert (
            run_cli("import", "llms", _catalog(tmp_path, fake.port), "-w", trained).exit_code == 0
        )
        with Store.open(trained, create=False) as store:
            base = uvicorn_server(build_app(store, auth=False))
            client = openai.OpenAI(
                base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=20
            )
            messages = [{"role": "user", "content": "enzyme protein gene membrane"}]
            raw = client.chat.completions.with_raw_response.create(model="locus", messages=messages)
            completion, llm = raw.parse(), raw.headers["x-locus-llm"]
            assert llm in SERVED and completion.model == f"model-{llm}"  # what answered upstream
            assert completion.choices[0].message.content == f"answer from {llm}"
            parts = list(
                client.chat.completions.create(model="locus:cost=0", messages=messages, stream=True)
            )
            text = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
            assert text == f"answer from {parts[0].model.removeprefix('model-')}"
            listed = [m.id for m in client.models.list()]
            assert "locus" in listed


def test_outcomes_teach_the_router_that_an_llm_fails_on_a_kind_of_query(
    trained: Path, tmp_path: Path, run_cli: Run
) -> None:
    """A real `locus serve` process with keys: an LLM onboarded as a math specialist is routed
    math queries; outcomes posted from production (every math answer wrong) lower its predicted
    success there, and routing moves away from it; one outcome goes by the request id of a real
    gateway answer."""
    from tests.planted_workspace import planted_rows

    rows = planted_rows()
    math = rows[(rows["llm_id"] == "math-1") & (rows["task"] == "math")]
    law = rows[(rows["llm_id"] == "math-1") & (rows["task"] == "law")]
    posted = [{"query_text": t, "score": 1.0} for t in math["query_text"][:120]] + [
        {"query_text": t, "score": s}
        for t, s in zip(law["query_text"][:60], law["score"][:60], strict=True)
    ]
    text = "integral derivative matrix limit polynomial"
    import shutil

    key_store = tmp_path / "ws"
    shutil.copytree(trained, key_store)
    made = run_cli("keys", "create", "outcomes", "-w", key_store, "--json").json()
    auth = {"authorization": f"Bearer {made['key']}"}  # type: ignore[index]
    with fake_upstreams({llm: ["ok"] for llm in SERVED}) as fake:
        run_cli("import", "llms", _catalog(tmp_path, fake.port), "-w", key_store)
        with locus_serve_process(key_store, auth=True) as (_, client):
            client.headers.update(auth)
            client.timeout = httpx.Timeout(60)
            assert client.post("/v1/llms/newbie/scores", json={"scores": posted}).status_code == 200

            def p_newbie() -> tuple[float, int]:
                """newbie's P(correct) on the math text, and how many of the four math
                specialists it ranks ahead of."""
                routed = client.post("/v1/route", json={"text": text, "top": 13}).json()
                order = [c["llm_id"] for c in routed["ranked"]]
                ranked = {c["llm_id"]: c["p_correct"] for c in routed["ranked"]}
                place = order.index("newbie")
                return ranked["newbie"], sum(order.index(f"math-{i}") > place for i in range(4))

            before, rank_before = p_newbie()
            # a real answer's request id, scored 0 by the caller
            chat = client.post(
                "/v1/chat/completions",
                json={"model": "locus", "messages": [{"role": "user", "content": text}]},
            )
            request_id = chat.headers["x-locus-request-id"]
            assert len(request_id) == 32
            one = client.post("/v1/outcomes", json={"request_id": request_id, "score": 0})
            assert one.status_code == 200 and one.json()["recorded"] == 1
            unknown = client.post("/v1/outcomes", json={"request_id": "nope", "score": 0})
            assert unknown.status_code == 404 and "post llm_id and query_text" in unknown.text
            # production says: newbie gets every math question wrong
            outcomes = [
                {"llm_id": "newbie", "query_text": t, "score": 0.0}
                for t in math["query_text"][:120]
            ]
            learned = client.post("/v1/outcomes", json={"outcomes": outcomes})
            assert learned.status_code == 200, learned.text
            assert learned.json()["refreshed"] == ["newbie"]
            after, rank_after = p_newbie()
    assert after < before - 0.1, (before, after)
    # ahead of some math specialist before, behind every one of them after
    assert rank_before > 0 and rank_after == 0, (rank_before, rank_after)
    with Store.open(key_store, create=False) as store:
        assert "outcomes" in set(store.sources()["name"])


def test_the_catalog_reloads_without_a_restart_and_an_endpoint_can_be_removed(
    trained: Path, tmp_path: Path, run_cli: Run, uvicorn_server: Callable[[object], str]
) -> None:
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(trained, ws)
    made = run_cli("keys", "create", "ops", "-w", ws, "--json").json()
    auth = {"authorization": f"Bearer {made['key']}"}  # type: ignore[index]
    with fake_upstreams({llm: ["ok"] for llm in SERVED}) as fake:
        catalog = _catalog(tmp_path, fake.port)
        assert run_cli("import", "llms", catalog, "-w", ws).exit_code == 0
        with Store.open(ws, create=False) as store:
            base = uvicorn_server(build_app(store))
            with httpx.Client(base_url=base, timeout=30, headers=auth) as client:
                listed = client.get("/v1/upstreams").json()["upstreams"]
                assert sorted(u["llm_id"] for u in listed) == sorted(SERVED)
                # the operator takes law-0 off: a blank base_url removes its endpoint
                lines = catalog.read_text().splitlines()
                lines = [lines[0]] + [
                    "law-0,,,0.001" if line.startswith("law-0,") else line for line in lines[1:]
                ]
                catalog.write_text("\n".join(lines) + "\n")
                assert run_cli("import", "llms", catalog, "-w", ws).exit_code == 0
                reloaded = client.post("/v1/catalog/reload")
                assert reloaded.status_code == 200
                assert reloaded.json() == {"added": [], "removed": ["law-0"], "changed": []}
                listed = client.get("/v1/upstreams").json()["upstreams"]
                assert sorted(u["llm_id"] for u in listed) == ["biology-0", "math-0"]
                direct = client.post(
                    "/v1/chat/completions",
                    json={"model": "law-0", "messages": [{"role": "user", "content": "tort"}]},
                )
                assert direct.status_code == 400 and "unknown model 'law-0'" in direct.text
                assert (
                    client.post("/v1/catalog/reload", headers={"authorization": ""}).status_code
                    == 401
                )


@contextmanager
def locus_serve_process(
    ws: Path, *, auth: bool = False
) -> Iterator[tuple[subprocess.Popen[str], httpx.Client]]:
    """`locus serve` on the workspace as its own process on a free loopback port (without
    keys unless `auth`), with a client once /health answers (60 s at most); terminated when the
    block ends (its stderr is then in `process.stderr_text`)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "locus"), "serve", "--port", str(port), "-w",
         str(ws), *([] if auth else ["--no-auth"])],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            assert server.poll() is None, "locus serve exited before serving"
            yield server, client
    finally:
        server.terminate()
        _, err = server.communicate(timeout=20)
        server.stderr_text = err  # type: ignore[attr-defined]


def test_a_real_locus_serve_routes_around_a_slow_upstream_under_a_latency_bound(
    trained: Path, tmp_path: Path, run_cli: Run
) -> None:
    """Real processes on loopback: `locus serve` measures each upstream; the LLM routed first
    answers in 0.4 s, so a request stating max_latency_ms=200 is answered by another that meets
    it, while a request without a bound still goes to the first."""
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(trained, ws)
    text = "integral derivative matrix limit polynomial"
    with fake_upstreams(
        {"math-0": ["hang"], "law-0": ["ok"], "biology-0": ["ok"]}, hang_s=0.4
    ) as fake:
        assert run_cli("import", "llms", _catalog(tmp_path, fake.port), "-w", ws).exit_code == 0
        with locus_serve_process(ws) as (_, client):
            chat = {"model": "locus", "messages": [{"role": "user", "content": text}]}
            first = client.post("/v1/chat/completions", json=chat)
            assert first.status_code == 200 and first.headers["x-locus-llm"] == "math-0"
            bounded = client.post("/v1/chat/completions", json={**chat, "max_latency_ms": 200})
            assert bounded.status_code == 200, bounded.text
            assert bounded.headers["x-locus-llm"] in {"law-0", "biology-0"}
            assert client.post("/v1/chat/completions", json=chat).headers["x-locus-llm"] == (
                "math-0"
            )
            upstreams = {u["llm_id"]: u for u in client.get("/v1/upstreams").json()["upstreams"]}
            assert upstreams["math-0"]["p50_ms"] >= 350
            assert upstreams[bounded.headers["x-locus-llm"]]["p50_ms"] < 200
    assert fake.requests["math-0"] == 2


def test_a_real_locus_serve_reloads_its_catalog_on_sighup(
    trained: Path, tmp_path: Path, run_cli: Run
) -> None:
    """`locus serve` as its own process on loopback: SIGHUP re-reads the catalog (an endpoint
    removed) and the server keeps serving."""
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(trained, ws)
    with fake_upstreams({llm: ["ok"] for llm in SERVED}) as fake:
        catalog = _catalog(tmp_path, fake.port)
        assert run_cli("import", "llms", catalog, "-w", ws).exit_code == 0
        with locus_serve_process(ws) as (server, client):
            listed = client.get("/v1/upstreams").json()["upstreams"]
            assert sorted(u["llm_id"] for u in listed) == sorted(SERVED)
            lines = catalog.read_text().splitlines()
            catalog.write_text(
                "\n".join(
                    [lines[0]]
                    + ["law-0,,,0.001" if x.startswith("law-0,") else x for x in lines[1:]]
                )
                + "\n"
            )
            assert run_cli("import", "llms", catalog, "-w", ws).exit_code == 0
            server.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 20
            names: list[str] = []
            while time.monotonic() < deadline:
                names = [u["llm_id"] for u in client.get("/v1/upstreams").json()["upstreams"]]
                if "law-0" not in names:
                    break
                time.sleep(0.2)
            assert sorted(names) == ["biology-0", "math-0"]
            assert server.poll() is None  # still serving
    assert "catalog reloaded on SIGHUP" in server.stderr_text  # type: ignore[attr-defined]


def test_wrong_outcomes_move_routing_off_an_llm_of_the_fit(
    trained: Path, tmp_path: Path, run_cli: Run
) -> None:
    """The newcomer's gateway scenario: an upstream of the fit answers wrongly from now on.
    Law questions routed to it, each followed by `POST /v1/outcomes` {request_id, score 0}:
    its drift alarm rises within about 10 outcomes (/v1/upstreams, /metrics), its evidence
    of the fit is discounted, its P(correct) on law falls and law goes to the other law LLM;
    the LLMs' P(correct) on maths moves by less than 0.05."""
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(trained, ws)
    made = run_cli("keys", "create", "outcomes", "-w", ws, "--json").json()
    auth = {"authorization": f"Bearer {made['key']}"}  # type: ignore[index]
    law = [f"court statute verdict jury appeal tort case {i}" for i in range(48)]
    with Store.open(ws, create=False) as store:  # the two law LLMs routed to first
        router = WorkspaceRouter(store)
        p_law = router.predict_proba(router.vectors_for(law)).mean(axis=0)
        order = [router.llm_ids[i] for i in np.argsort(-p_law)]
    # the best law LLM, then two that are not (0.2 on law): it leads by far until it changes
    served = (next(llm for llm in order if llm.startswith("law-")), "math-0", "biology-0")
    maths = "integral derivative matrix limit polynomial"
    with fake_upstreams({llm: ["ok"] for llm in served}) as fake:
        catalog = tmp_path / "llms.csv"
        catalog.write_text(
            "llm_id,base_url,upstream_model,cost_per_query\n"
            + "".join(
                f"{llm},http://127.0.0.1:{fake.port}/{llm}/v1,m-{llm},0.001\n" for llm in served
            )
        )
        assert run_cli("import", "llms", catalog, "-w", ws).exit_code == 0
        with locus_serve_process(ws, auth=True) as (_, client):
            client.headers.update(auth)
            client.timeout = httpx.Timeout(60)

            def ranked(text: str) -> dict[str, float]:
                found = client.post("/v1/route", json={"text": text, "top": 13}).json()
                return {c["llm_id"]: c["p_correct"] for c in found["ranked"]}

            maths_before = ranked(maths)
            first = client.post(
                "/v1/chat/completions",
                json={"model": "locus", "messages": [{"role": "user", "content": law[0]}]},
            )
            swapped = first.headers["x-locus-llm"]
            assert swapped == served[0]
            p_before = ranked(law[-1])[swapped]
            answered_by = []
            for text in law[:40]:
                chat = client.post(
                    "/v1/chat/completions",
                    json={"model": "locus", "messages": [{"role": "user", "content": text}]},
                )
                answered_by.append(chat.headers["x-locus-llm"])
                wrong = answered_by[-1] == swapped  # the swapped one answers wrongly, others well
                posted = client.post(
                    "/v1/outcomes",
                    json={
                        "request_id": chat.headers["x-locus-request-id"],
                        "score": 0 if wrong else 1,
                    },
                )
                assert posted.status_code == 200, posted.text
            after = [
                client.post(
                    "/v1/chat/completions",
                    json={"model": "locus", "messages": [{"role": "user", "content": text}]},
                ).headers["x-locus-llm"]
                for text in law[40:]
            ]
            ranked_after = ranked(law[-1])
            p_after = ranked_after[swapped]
            maths_after = ranked(maths)
            upstreams = {u["llm_id"]: u for u in client.get("/v1/upstreams").json()["upstreams"]}
            metrics = client.get("/metrics").text
    # the alarm: its outcomes against the P(correct) predicted when it answered
    drift = upstreams[swapped]["outcomes"]
    assert drift["alarm"] and drift["outcomes"] == answered_by.count(swapped), (drift, answered_by)
    assert drift["rate"] == 0.0 and drift["predicted"] > 0.7
    assert 5 <= drift["alarm_at"] <= 20, drift  # a 0.9 LLM now always wrong: about 10
    assert f'locus_drift_alarm{{llm_id="{swapped}"}} 1.0' in metrics
    for other in served[1:]:  # right answers raise no alarm
        assert upstreams[other]["outcomes"] is None or not upstreams[other]["outcomes"]["alarm"]
    # routing left it once the alarm discounted its evidence of the fit, and stays off it
    assert answered_by[0] == swapped, answered_by
    assert answered_by.count(swapped) <= drift["alarm_at"], answered_by
    assert swapped not in after, (served, after, p_before, p_after, ranked_after)
    assert p_after < p_before - 0.5, (p_before, p_after)
    moved = {
        llm: abs(maths_after[llm] - maths_before[llm]) for llm in maths_before if llm != swapped
    }
    assert max(moved.values()) < 0.05, moved


def test_the_decision_log_keeps_each_answer_with_its_probability_and_outcome(
    trained: Path, tmp_path: Path, run_cli: Run, uvicorn_server: Callable[[object], str]
) -> None:
    """`decision_log = "text"`: every answered chat request is in the store with the
    probability routing chose its LLM; an outcome posted by request id lands on it, also
    through a server started after the answer (the id resolved from the log); `locus
    decisions` sums it up and exports it."""
    import json
    import shutil

    from locus.server.settings import ServerSettings

    workspace = tmp_path / "ws"
    shutil.copytree(trained, workspace)
    with Store.open(workspace, create=False) as store:
        store.trim_decisions(keep=0)  # what other tests' servers logged in the shared one
    made = run_cli("keys", "create", "logger", "-w", workspace, "--json").json()
    auth = {"authorization": f"Bearer {made['key']}"}  # type: ignore[index]
    settings = ServerSettings(explore=0.5, decision_log="text")
    texts = [f"{word} question {i}" for i in range(4) for word in ("integral", "court", "cell")]
    with fake_upstreams({llm: ["ok"] for llm in SERVED}) as fake:
        assert (
            run_cli("import", "llms", _catalog(tmp_path, fake.port), "-w", workspace).exit_code == 0
        )
        with Store.open(workspace, create=False) as store:
            base = uvicorn_server(build_app(store, settings=settings))
            answered = {}
            with httpx.Client(base_url=base, timeout=20, headers=auth) as client:
                for text in texts:
                    body = {"model": "locus", "messages": [{"role": "user", "content": text}]}
                    reply = client.post("/v1/chat/completions", json=body)
                    assert reply.status_code == 200, reply.text
                    answered[reply.headers["x-locus-request-id"]] = reply.headers["x-locus-llm"]
                pinned = client.post("/v1/chat/completions", json={
                    "model": "law-0", "messages": [{"role": "user", "content": "a pinned one"}],
                })  # fmt: skip
                assert pinned.status_code == 200
                first, *rest = list(answered)
                outcomes = [{"request_id": r, "score": 1.0} for r in rest]
                posted = client.post("/v1/outcomes", json={"outcomes": outcomes})
                assert posted.status_code == 200, posted.text
            # a server started later resolves the first request's id from the log
            later = uvicorn_server(build_app(store, settings=settings))
            with httpx.Client(base_url=later, timeout=20, headers=auth) as client:
                again = client.post("/v1/outcomes", json={"request_id": first, "score": 0.0})
                assert again.status_code == 200, again.text
            logged = {d["request_id"]: d for d in store.decisions()}
    assert set(answered) < set(logged) and len(logged) == len(texts) + 1
    for request_id, llm in answered.items():
        decision = logged[request_id]
        assert decision["llm_id"] == llm and decision["text"] in texts
        assert 0 < decision["propensity"] <= 1 and 0 < decision["p_correct"] < 1
        assert decision["latency_ms"] > 0 and decision["ranked"][0][0] in SERVED
    assert logged[first]["outcome"] == 0.0
    assert all(logged[r]["outcome"] == 1.0 for r in rest)
    [pinned_row] = [d for d in logged.values() if d["text"] == "a pinned one"]
    assert pinned_row["propensity"] is None  # pinned: not a routing choice
    report = run_cli("decisions", "-w", workspace, "--json").json()
    assert isinstance(report, dict)
    assert report["decisions"] == len(texts) + 1 and report["outcomes"] == len(texts)
    assert sum(e["requests"] for e in report["llms"].values()) == len(texts) + 1
    shown = run_cli("decisions", "-w", workspace, "--export", tmp_path / "log.jsonl")
    assert shown.exit_code == 0 and f"wrote {len(texts) + 1} decisions" in shown.stdout
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    assert {json.loads(line)["request_id"] for line in lines} == set(logged)
    bad = run_cli("decisions", "-w", workspace, "--export", tmp_path / "log.txt")
    assert bad.exit_code == 2 and "expected a .csv or .jsonl" in bad.stderr


def test_serve_ages_outcomes_out_of_routing_when_told(trained: Path) -> None:
    """`outcome_max_age_days` reaches the workspace router (which drops older outcomes from
    the votes: `test_outcomes_older_than_the_max_age_leave_the_votes`), and the pool's version
    then moves with time, so that the window moves without a posted outcome."""
    from locus.server.settings import ServerSettings

    with Store.open(trained, create=False) as store:
        aged = build_app(store, settings=ServerSettings(outcome_max_age_days=7)).state.router
        plain = build_app(store).state.router
    assert aged.router.outcome_max_age_s == 7 * 86_400
    assert plain.router.outcome_max_age_s is None
    assert isinstance(aged._seen, tuple) and not isinstance(plain._seen, tuple)
    with pytest.raises(LocusInputError, match="outcome_max_age_days"):
        ServerSettings(outcome_max_age_days=-1)


def test_the_gateways_canary_raises_the_alarm_for_a_swapped_endpoint(
    trained: Path, tmp_path: Path, run_cli: Run, uvicorn_server: Callable[[object], str]
) -> None:
    """`canary_every_s`: the served gateway asks the canary probes on its schedule. law-0's
    endpoint starts answering as math-0's: /v1/upstreams says so ("answers_like"), /metrics
    raises `locus_canary_alarm`, and law-0's evidence of the fit leaves its votes (on_drift
    "discount"); math-0 stays quiet."""
    import shutil

    from locus.server.settings import ServerSettings

    workspace = tmp_path / "ws"
    shutil.copytree(trained, workspace)
    with fake_upstreams({llm: [f"echo:{llm}"] for llm in SERVED}) as fake:
        imported = run_cli("import", "llms", _catalog(tmp_path, fake.port), "-w", workspace)
        assert imported.exit_code == 0, imported.stderr
        recorded = run_cli("canary", "record", "--probes", "8", "-w", workspace, "--json")
        assert recorded.exit_code == 0, recorded.stderr
        with Store.open(workspace, create=False) as store:
            app = build_app(store, auth=False, settings=ServerSettings(canary_every_s=0.2))
            base = uvicorn_server(app)
            try:
                with httpx.Client(base_url=base, timeout=10) as client:
                    deadline = time.monotonic() + 60

                    def canary(llm: str) -> dict[str, Any] | None:
                        rows = client.get("/v1/upstreams").json()["upstreams"]
                        return next(r["canary"] for r in rows if r["llm_id"] == llm)

                    while canary("law-0") is None and time.monotonic() < deadline:
                        time.sleep(0.1)
                    assert canary("law-0")["alarm"] is False  # type: ignore[index]
                    fake.scripts["law-0"] = ["echo:math-0"]
                    while not (canary("law-0") or {}).get("alarm") and time.monotonic() < deadline:
                        time.sleep(0.1)
                    found = canary("law-0")
                    assert found is not None and found["alarm"], found
                    assert found["changed"] == 8 and found["answers_like"] == "math-0"
                    assert canary("math-0")["alarm"] is False  # type: ignore[index]
                    metrics = client.get("/metrics").text
                    assert 'locus_canary_alarm{llm_id="law-0"} 1.0' in metrics
                    assert 'locus_canary_alarm{llm_id="math-0"} 0.0' in metrics
                    assert "law-0" in app.state.router.router.discounted
            finally:
                app.state.canary.stop()
