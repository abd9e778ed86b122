"""The gateway against fake upstreams on loopback: every fault scenario is one test.

Requests go through the real FastAPI app (httpx's ASGI transport) and from the gateway over
real HTTP to scripted upstream servers on 127.0.0.1; every wait is bounded (attempt timeout
0.4 s, total 3 s).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import httpx
import pytest

from locus.errors import LocusInputError
from locus.routing.decision import RouteRequest
from locus.routing.router import RankedLLM, RouteDecision
from locus.server.app import create_app
from locus.server.gateway import Gateway
from locus.server.health import CircuitBreaker
from locus.server.service_router import ServiceRouter
from locus.server.settings import ServerSettings
from locus.server.upstream import Upstreams
from tests.server.fakes import FakeUpstreams, fake_upstreams

SETTINGS = ServerSettings(
    attempt_timeout_s=0.4, first_token_timeout_s=0.4, total_timeout_s=4.0, stall_timeout_s=0.4,
    max_attempts=3, retries_per_llm=1, retry_backoff_s=0.05, retry_after_max_s=2.0,
    breaker_failures=2, breaker_cooldown_s=10.0, max_body_bytes=20_000, max_batch=4,
)  # fmt: skip
# for tests where no upstream should time out: a loaded machine must not turn a success into a
# fallback (0.4 s to a first token was missed once in CI)
PATIENT = dataclasses.replace(
    SETTINGS, attempt_timeout_s=10.0, first_token_timeout_s=10.0, stall_timeout_s=10.0,
    total_timeout_s=20.0,
)  # fmt: skip
PRICES = {
    "a": {"price_in_per_mtok": 2.0, "price_out_per_mtok": 10.0},
    "b": {"cost_per_query": 0.01},
}


class RankedRouter:
    """A real `route_texts` over a fixed ranking (a, b, c, d), honouring `unavailable`."""

    llm_ids = ("a", "b", "c", "d")

    costs: ClassVar[dict[str, float]] = {"a": 0.004, "b": 0.003, "c": 0.002, "d": 0.001}

    def route_texts(
        self,
        texts: Sequence[str],
        request: RouteRequest | None = None,
        *,
        tasks: Sequence[str | None] | None = None,
        **options: Any,
    ) -> list[RouteDecision]:
        request = RouteRequest.of(request, **options)
        ranked = [llm for llm in self.llm_ids if llm not in request.unavailable]
        if not request.guarded:  # unguarded, the planted router prefers b
            ranked.sort(key=lambda llm: llm != "b")
        if request.uses_cost:
            ranked = ranked[::-1]  # any cost rule: the cheapest first
        top = request.top
        candidates = tuple(
            RankedLLM(llm, 0.9 - 0.1 * i, self.costs.get(llm), 0.9 - 0.1 * i)
            for i, llm in enumerate(ranked)
        )
        return [RouteDecision(ranked[0], 0.9, None, candidates[:top]) for _ in texts]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def build(
    fake: FakeUpstreams, clock: Clock | None = None, settings: ServerSettings = SETTINGS
) -> tuple[Any, Gateway]:
    router = ServiceRouter(RankedRouter())
    clock = clock or Clock()
    gateway = Gateway(
        router.rank, Upstreams(fake.endpoints()), prices=PRICES, settings=settings,
        breaker=CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_s, clock=clock),
    )  # fmt: skip
    return create_app(router, gateway, settings=settings), gateway


CHAT = {"model": "locus", "messages": [{"role": "user", "content": "What is 2+2?"}]}


def post(app: Any, path: str, body: Any = None, **kwargs: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://locus") as client:
            if body is None and "content" not in kwargs:
                return await client.get(path)
            return (
                await client.post(path, json=body, **kwargs)
                if body is not None
                else await client.post(path, **kwargs)
            )

    return asyncio.run(asyncio.wait_for(go(), timeout=20))


def chat(
    scripts: dict[str, list[str]],
    body: dict[str, Any] | None = None,
    *,
    settings: ServerSettings = PATIENT,
    **fake_options: Any,
) -> tuple[httpx.Response, FakeUpstreams, Gateway]:
    """One chat request; patient unless the test is about a timeout (`settings=SETTINGS`): a
    loaded CI machine once let both of a's 0.4 s attempts expire before its server read them."""
    with fake_upstreams(scripts, **fake_options) as fake:
        app, gateway = build(fake, settings=settings)
        response = post(app, "/v1/chat/completions", body or CHAT)
    return response, fake, gateway


def test_the_routed_llm_answers_and_the_answer_is_accounted() -> None:
    response, fake, gateway = chat({"a": ["ok"], "b": ["ok"], "c": ["ok"]})
    assert response.status_code == 200
    body = response.json()
    # the answer names what really answered upstream; the pool's llm_id is in the header
    assert (
        body["model"] == "upstream-a"
        and body["choices"][0]["message"]["content"] == "answer from a"
    )
    assert response.headers["x-locus-llm"] == "a" and response.headers["x-locus-attempts"] == "1"
    assert response.headers["x-locus-upstream-model"] == "upstream-a"
    assert "x-locus-failed" not in response.headers
    assert float(response.headers["x-locus-cost-usd"]) == pytest.approx((1000 * 2 + 500 * 10) / 1e6)
    assert fake.bodies["a"][0]["model"] == "upstream-a"  # the upstream's own name for it
    assert fake.requests == {"a": 1}
    assert gateway.metrics.value("locus_choices_total", llm_id="a") == 1


def test_an_answer_without_prices_has_no_cost_header() -> None:
    """c has no price: its answer omits x-locus-cost-usd (it was sent empty); no header of
    the answer is empty."""
    response, _, _ = chat({"c": ["ok"]}, {**CHAT, "unavailable": ["a", "b"]})
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "c"
    assert "x-locus-cost-usd" not in response.headers
    assert all(value for name, value in response.headers.items() if name.startswith("x-locus"))


@pytest.mark.parametrize(
    ("fault", "calls", "kind"),
    [
        ("429", 2, "rate_limited"),  # a short Retry-After: once more after it, then on
        ("429-long", 1, "rate_limited"),  # a long one: on at once
        ("500", 2, "server_error"),  # transient: the same LLM once more
        ("503", 2, "server_error"),
        ("reset", 2, "dropped"),  # accepted, then reset or closed: not "connect"
        ("close", 2, "dropped"),
        ("hang", 1, "timeout"),  # a timeout spent the attempt's time: on at once
        ("garbage", 1, "bad_response"),
        ("context", 1, "context_length"),
        ("404", 1, "retired"),
        ("410", 1, "retired"),
    ],
)
def test_a_failing_primary_falls_back_to_the_next_llm(fault: str, calls: int, kind: str) -> None:
    response, fake, gateway = chat(
        {"a": [fault], "b": ["ok"], "c": ["ok"]}, settings=SETTINGS, hang_s=2.0
    )
    assert response.status_code == 200, response.text
    assert response.json()["model"] == "upstream-b"  # body model and usage are the fallback's
    assert response.headers["x-locus-llm"] == "b"
    assert response.headers["x-locus-attempts"] == str(calls + 1)
    assert response.headers["x-locus-failed"] == ",".join([f"a={kind}"] * calls)
    assert float(response.headers["x-locus-cost-usd"]) == pytest.approx(0.01)
    assert fake.requests["a"] == calls and fake.requests["b"] == 1
    assert gateway.metrics.value("locus_fallbacks_total") == 1


def test_an_upstream_nobody_listens_on_is_a_connect_failure() -> None:
    """A refused connection is "connect"; one accepted and dropped is "dropped" (above)."""
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with fake_upstreams({"a": ["ok"], "b": ["ok"]}) as fake:
        app, gateway = build(fake, settings=PATIENT)
        endpoint = gateway.upstreams.endpoints["a"]
        gateway.upstreams.endpoints["a"] = dataclasses.replace(
            endpoint, base_url=f"http://127.0.0.1:{port}/a/v1"
        )
        response = post(app, "/v1/chat/completions", CHAT)
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "b"
    assert response.headers["x-locus-failed"].split(",")[0] == "a=connect"


def test_one_500_is_retried_on_the_same_llm() -> None:
    response, fake, gateway = chat({"a": ["500", "ok"], "b": ["ok"]})
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "a"
    assert response.headers["x-locus-attempts"] == "2" and fake.requests == {"a": 2}
    assert gateway.metrics.value("locus_fallbacks_total") == 0
    assert gateway.metrics.value("locus_upstream_errors_total", llm_id="a", kind="retried") == 1


def test_a_429_with_a_short_retry_after_is_waited_for_on_the_same_llm() -> None:
    import time

    started = time.perf_counter()
    response, fake, _ = chat({"a": ["429", "ok"], "b": ["ok"]})
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "a"
    assert fake.requests == {"a": 2} and time.perf_counter() - started >= 1.0


def test_a_retired_model_is_skipped_from_then_on(caplog: pytest.LogCaptureFixture) -> None:
    with fake_upstreams({"a": ["404"], "b": ["ok"]}) as fake:
        app, gateway = build(fake)
        with caplog.at_level("WARNING", logger="locus.server"):
            first = post(app, "/v1/chat/completions", CHAT)
        assert first.headers["x-locus-llm"] == "b" and gateway.retired == {"a"}
        assert "the upstream answered 'model not found'" in caplog.text
        assert "falls back to b" in caplog.text
        again = post(app, "/v1/chat/completions", CHAT)
        assert again.headers["x-locus-llm"] == "b" and fake.requests["a"] == 1
        assert post(app, "/ready").json()["retired"] == ["a"]


def test_persistent_429_and_503_exhaust_the_attempts_with_a_json_error() -> None:
    response, fake, _ = chat({"a": ["429-long"], "b": ["503"], "c": ["429-long"], "d": ["ok"]})
    assert response.status_code == 503
    error = response.json()["error"]
    assert "after 4 attempts" in error["message"] and "a: rate_limited" in error["message"]
    assert response.headers["x-locus-attempts"] == "4" and "x-locus-llm" not in response.headers
    assert response.headers["x-locus-failed"] == (
        "a=rate_limited,b=server_error,b=server_error,c=rate_limited"
    )
    assert fake.requests.get("d", 0) == 0  # bounded: max_attempts = 3 LLMs (b twice)


def test_the_fallback_target_failing_too_moves_on_again() -> None:
    response, _, _ = chat({"a": ["500"], "b": ["reset"], "c": ["ok"]})
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "c"
    assert response.headers["x-locus-attempts"] == "5"  # a and b each once more


def test_every_upstream_hanging_is_a_504_within_the_time_bound() -> None:
    import time

    started = time.perf_counter()
    response, _, _ = chat(
        {"a": ["hang"], "b": ["hang"], "c": ["hang"]}, settings=SETTINGS, hang_s=1.5
    )
    assert response.status_code == 504
    assert time.perf_counter() - started < 8  # 3 attempts x 0.4 s, plus server shutdown


def test_a_content_filter_refusal_is_returned_not_retried() -> None:
    response, fake, _ = chat({"a": ["filter"], "b": ["ok"]})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "content_filter"
    assert fake.requests.get("b", 0) == 0


@pytest.mark.parametrize("streamed", [False, True])
def test_a_refusal_carries_the_llm_the_attempts_and_a_request_id(streamed: bool) -> None:
    """The upstream's 400 comes back as it came, with the x-locus-* headers of any answer: the
    LLM that refused, a request id, the attempts (they were missing)."""
    response, _, _ = chat({"a": ["filter"], "b": ["ok"]}, {**CHAT, "stream": streamed})
    assert response.status_code == 400 and response.json()["error"]["code"] == "content_filter"
    assert response.headers["x-locus-llm"] == "a" and response.headers["x-locus-attempts"] == "1"
    assert len(response.headers["x-locus-request-id"]) == 32
    assert "x-locus-failed" not in response.headers  # nothing was tried before a


def test_a_fallback_refusing_the_request_moves_on_to_the_next() -> None:
    """The primary is down; the fallback rejects what the primary took (a prefill, a
    parameter): that is the fallback's limit, so the next LLM gets the request."""
    response, fake, _ = chat({"a": ["503"], "b": ["filter"], "c": ["ok"]})
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "c"
    assert fake.requests == {"a": 2, "b": 1, "c": 1}
    assert response.headers["x-locus-failed"] == "a=server_error,a=server_error,b=refused"
    # every fallback refusing: the client gets the first refusal as it came, named
    refused, _, _ = chat({"a": ["503"], "b": ["filter"], "c": ["filter"]})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "content_filter"
    assert refused.headers["x-locus-llm"] == "b" and refused.headers["x-locus-attempts"] == "4"
    assert refused.headers["x-locus-failed"] == "a=server_error,a=server_error,c=refused"


def test_a_latency_bound_prefers_the_llms_that_meet_it() -> None:
    """a is routed first but slow (0.25 s); once measured, a request stating max_latency_ms
    goes to b, which meets it, while requests without a bound still go to a."""
    with fake_upstreams({"a": ["hang"], "b": ["ok"], "c": ["ok"]}, hang_s=0.25) as fake:
        app, gateway = build(fake)
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "a"
        assert gateway.latency.median_ms("a") >= 200  # type: ignore[operator]
        bounded = {**CHAT, "max_latency_ms": 150}
        answer = post(app, "/v1/chat/completions", bounded)
        assert answer.status_code == 200 and answer.headers["x-locus-llm"] == "b"
        assert "max_latency_ms" not in fake.bodies["b"][0]  # locus's field stays with locus
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "a"
        status = {u["llm_id"]: u for u in post(app, "/v1/upstreams").json()["upstreams"]}
        assert status["a"]["p50_ms"] >= 200 and status["b"]["p50_ms"] < 150
        assert status["a"]["error_rate"] == 0.0 and status["c"]["calls"] == 0
        assert status["a"]["circuit"] == "closed" and not status["a"]["retired"]
        bad = post(app, "/v1/chat/completions", {**CHAT, "max_latency_ms": 0})
        assert bad.status_code == 400 and "max_latency_ms" in bad.json()["error"]["message"]


def test_a_real_llm_id_bypasses_routing_and_falls_back_by_the_ranking() -> None:
    response, fake, _ = chat({"a": ["ok"], "c": ["503"], "b": ["ok"]}, {**CHAT, "model": "c"})
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "a"
    assert fake.requests["c"] == 2


class CountingRouter(RankedRouter):
    def __init__(self) -> None:
        self.calls = 0

    def route_texts(self, texts: Any, request: Any = None, **options: Any) -> Any:
        self.calls += 1
        return super().route_texts(texts, request, **options)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_pinned_llm_is_called_without_routing_until_it_fails(streamed: bool) -> None:
    """model = an llm_id: the text is not routed (encoded) for the first attempt; the
    ranking is computed once the pinned LLM fails, and its next best answers."""
    with fake_upstreams({"a": ["ok"], "b": ["ok", "503"], "c": ["ok"]}) as fake:
        counting = CountingRouter()
        router = ServiceRouter(counting)
        gateway = Gateway(router.rank, Upstreams(fake.endpoints()), settings=PATIENT)
        app = create_app(router, gateway, settings=PATIENT)
        pinned = {**CHAT, "model": "b", "stream": streamed}
        first = post(app, "/v1/chat/completions", pinned)
        assert first.status_code == 200 and first.headers["x-locus-llm"] == "b"
        assert counting.calls == 0
        assert "x-locus-p-correct" not in first.headers  # the router was not asked
        fallen = post(app, "/v1/chat/completions", pinned)
        assert fallen.status_code == 200 and fallen.headers["x-locus-llm"] == "a"
        assert fallen.headers["x-locus-failed"] == "b=server_error,b=server_error"
        assert counting.calls == 1 and fake.requests == {"a": 1, "b": 3}
        assert fallen.headers["x-locus-p-correct"] == "0.9000"  # a's, from the ranking


@pytest.mark.parametrize("streamed", [False, True])
def test_a_pinned_llm_asked_for_no_substitution_fails_rather_than_being_replaced(
    streamed: bool,
) -> None:
    """`"fallbacks": false` (or the header x-locus-fallbacks: none): a pinned LLM that fails
    is a 503 naming its failure, no other LLM is called; one that cannot be called at all is a
    503 naming why. The default stays as documented: the next best answers."""
    with fake_upstreams({"a": ["ok"], "b": ["500"]}) as fake:
        app, _ = build(fake, settings=PATIENT)
        strict = {**CHAT, "model": "b", "stream": streamed, "fallbacks": False}
        refused = post(app, "/v1/chat/completions", strict)
        assert refused.status_code == 503, refused.text
        assert "no LLM answered" in refused.text and "b" in refused.json()["error"]["message"]
        assert set(fake.requests) == {"b"}  # a was never called
        by_header = post(
            app, "/v1/chat/completions", {**CHAT, "model": "b", "stream": streamed},
            headers={"x-locus-fallbacks": "none"},
        )  # fmt: skip
        assert by_header.status_code == 503 and set(fake.requests) == {"b"}
        default = post(app, "/v1/chat/completions", {**CHAT, "model": "b", "stream": streamed})
        assert default.status_code == 200 and default.headers["x-locus-llm"] == "a"
        bad = post(app, "/v1/chat/completions", {**CHAT, "model": "b", "fallbacks": "no"})
        assert bad.status_code == 400 and "fallbacks: expected true" in bad.text
    with fake_upstreams({"a": ["ok"], "b": ["410"]}) as fake:  # b's model is gone: retired
        app, gateway = build(fake, settings=PATIENT)
        assert post(app, "/v1/chat/completions", {**CHAT, "model": "b"}).status_code == 200
        assert "b" in gateway.retired
        strict = {**CHAT, "model": "b", "stream": streamed, "fallbacks": False}
        found = post(app, "/v1/chat/completions", strict)
        assert found.status_code == 503, found.text
        assert "b cannot be called (retired)" in found.json()["error"]["message"]
        assert fake.requests == {"a": 1, "b": 1}


def test_a_key_created_without_substitution_keeps_its_pinned_requests_pinned(
    tmp_path: Any,
) -> None:
    """`locus keys create --no-substitution`: every request of that key naming an LLM gets it
    or a 503; its routed requests, and another key's pinned ones, still fall back."""
    from locus.store import Store

    with Store.open(tmp_path / "ws", create=True) as store:
        _, strict_secret = store.create_key("strict", substitute=False)
        _, loose_secret = store.create_key("loose")
        assert [k["substitute"] for k in sorted(store.list_keys(), key=lambda k: k["name"])] == [
            True, False,
        ]  # fmt: skip
        strict = {"authorization": f"Bearer {strict_secret}"}
        loose = {"authorization": f"Bearer {loose_secret}"}
        with fake_upstreams({"a": ["500"], "b": ["ok"]}) as fake:
            router = ServiceRouter(RankedRouter())
            gateway = Gateway(
                router.rank, Upstreams(fake.endpoints()), prices=PRICES, settings=PATIENT
            )
            app = create_app(router, gateway, settings=PATIENT, verify_key=store.verify_key)
            pinned = {**CHAT, "model": "a"}
            refused = post(app, "/v1/chat/completions", pinned, headers=strict)
            assert refused.status_code == 503 and "a: " in refused.json()["error"]["message"]
            assert set(fake.requests) == {"a"}
            routed = post(app, "/v1/chat/completions", CHAT, headers=strict)
            assert routed.status_code == 200 and routed.headers["x-locus-llm"] == "b"
            other = post(app, "/v1/chat/completions", pinned, headers=loose)
            assert other.status_code == 200 and other.headers["x-locus-llm"] == "b"


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def test_an_image_only_message_goes_as_it_is_to_a_pinned_llm_and_is_refused_routed() -> None:
    """Nothing needs routing for a pinned LLM: its image-only message goes upstream as it
    came. Routed, there is no text to read: a 400 saying so and how to send it."""
    image_only = [{"role": "user", "content": [IMAGE]}]
    with fake_upstreams({"a": ["ok"], "b": ["ok"]}) as fake:
        app, _ = build(fake, settings=PATIENT)
        pinned = post(app, "/v1/chat/completions", {"model": "b", "messages": image_only})
        assert pinned.status_code == 200, pinned.text
        assert pinned.headers["x-locus-llm"] == "b"
        assert pinned.headers["x-locus-unread"] == "1 image_url part"
        assert fake.bodies["b"][0]["messages"] == image_only  # passed through untouched
        routed = post(app, "/v1/chat/completions", {"model": "locus", "messages": image_only})
        assert routed.status_code == 400
        message = routed.json()["error"]["message"]
        assert "no text to route on (it holds 1 image_url part)" in message
        assert "name an LLM in model" in message


def test_a_mixed_message_is_routed_by_its_text_and_says_what_it_did_not_read() -> None:
    mixed = [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, IMAGE, IMAGE]}]
    response, fake, _ = chat({"a": ["ok"], "b": ["ok"]}, {"model": "locus", "messages": mixed})
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "a"
    assert response.headers["x-locus-unread"] == "2 image_url parts"
    assert fake.bodies["a"][0]["messages"] == mixed
    plain, _, _ = chat({"a": ["ok"]})
    assert "x-locus-unread" not in plain.headers


def test_a_pinned_llm_slower_than_the_latency_bound_is_ranked_as_before() -> None:
    """A pinned LLM whose median misses the request's max_latency_ms goes behind the LLMs
    that meet it: that needs the ranking, computed at once."""
    with fake_upstreams({"a": ["hang"], "b": ["ok"]}, hang_s=0.3) as fake:
        app, _ = build(fake, settings=PATIENT)
        assert post(app, "/v1/chat/completions", {**CHAT, "model": "a"}).status_code == 200
        bounded = post(app, "/v1/chat/completions", {**CHAT, "model": "a", "max_latency_ms": 100})
        assert bounded.headers["x-locus-llm"] == "b" and fake.requests == {"a": 1, "b": 1}


def test_unavailable_llms_are_never_called() -> None:
    body = {**CHAT, "unavailable": ["a", "b"]}
    response, fake, _ = chat({"a": ["ok"], "b": ["ok"], "c": ["ok"]}, body)
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "c"
    assert set(fake.requests) == {"c"}


def test_a_flapping_primary_opens_its_circuit_and_comes_back() -> None:
    clock = Clock()
    with fake_upstreams({"a": ["500", "500", "ok"], "b": ["ok"]}) as fake:
        app, gateway = build(fake, clock)
        # two failures in a row (a call and its retry) open the circuit
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "b"
        assert gateway.breaker.state("a") == "open"
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "b"
        assert fake.requests["a"] == 2  # skipped while open
        clock.now += SETTINGS.breaker_cooldown_s + 1
        answer = post(app, "/v1/chat/completions", CHAT)
        assert answer.headers["x-locus-llm"] == "a"  # the trial request succeeds: closed again
        assert gateway.breaker.state("a") == "closed"


def test_a_failed_half_open_trial_is_one_upstream_call() -> None:
    """A transient failure is retried on the same LLM, but not a half-open circuit's trial:
    its failure opens the circuit again at once, and the request falls back."""
    clock = Clock()
    with fake_upstreams({"a": ["500", "500", "500", "ok"], "b": ["ok"]}) as fake:
        app, gateway = build(fake, clock)
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "b"
        assert gateway.breaker.state("a") == "open" and fake.requests["a"] == 2
        clock.now += SETTINGS.breaker_cooldown_s + 1
        trial = post(app, "/v1/chat/completions", CHAT)
        assert trial.headers["x-locus-llm"] == "b"
        assert trial.headers["x-locus-failed"] == "a=server_error"  # one call, not two
        assert fake.requests["a"] == 3 and gateway.breaker.state("a") == "open"
        clock.now += SETTINGS.breaker_cooldown_s + 1
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "a"
        assert fake.requests["a"] == 4 and gateway.breaker.state("a") == "closed"


def test_a_trial_ended_by_a_refusal_closes_the_circuit() -> None:
    """A content filter refusing the trial request is an answer: the upstream is up, and the
    circuit closes (it stayed half-open with its trial running, and the LLM was skipped for
    good)."""
    clock = Clock()
    with fake_upstreams({"a": ["500", "500", "filter", "ok"], "b": ["ok"]}) as fake:
        app, gateway = build(fake, clock)
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "b"
        clock.now += SETTINGS.breaker_cooldown_s + 1
        assert post(app, "/v1/chat/completions", CHAT).status_code == 400  # the trial, refused
        assert gateway.breaker.state("a") == "closed"
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "a"


def test_a_trial_that_never_reports_is_given_up_after_a_cooldown() -> None:
    """A trial whose request was cancelled reports neither success nor failure: after another
    cool-down the breaker lets a new trial through."""
    clock = Clock()
    breaker = CircuitBreaker(failures=1, cooldown_s=10.0, clock=clock)
    breaker.failure("a")
    clock.now += 11
    assert breaker.allow("a") and not breaker.allow("a")  # one trial at a time
    clock.now += 5
    assert not breaker.allow("a") and breaker.state("a") == "half-open"
    clock.now += 6
    assert breaker.allow("a")  # the lost trial is given up


def test_a_429_with_retry_after_holds_the_llm() -> None:
    clock = Clock()
    with fake_upstreams({"a": ["429-long", "ok"], "b": ["ok"]}) as fake:
        app, _ = build(fake, clock)
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "b"
        # held for the cool-down (the Retry-After, capped by it)
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "b"
        assert fake.requests["a"] == 1
        clock.now += SETTINGS.breaker_cooldown_s + 1
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "a"


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/v1/chat/completions", {"model": "locus"}, 400, "messages: required"),
        ("/v1/chat/completions", {**CHAT, "messages": []}, 400, "non-empty list"),
        (
            "/v1/chat/completions",
            {**CHAT, "messages": [{"role": "user", "content": " "}]},
            400,
            "no text",
        ),
        ("/v1/chat/completions", {**CHAT, "model": "gpt-9"}, 400, "unknown model 'gpt-9'"),
        ("/v1/chat/completions", {**CHAT, "model": "locus:cost=x"}, 400, "expected cost=W"),
        ("/v1/chat/completions", {**CHAT, "model": "locus:quality=1.5"}, 400, "[0, 1]"),
        ("/v1/chat/completions", {**CHAT, "model": "locus:quality=-1"}, 400, "[0, 1]"),
        ("/v1/chat/completions", {**CHAT, "model": "locus:budget=-1"}, 400, "budget must"),
        ("/v1/chat/completions", {**CHAT, "model": "locus:speed=1"}, 400, "quality=S"),
        (
            "/v1/chat/completions",
            {**CHAT, "temperatur": 0.2},
            400,
            "unknown parameter 'temperatur' (did you mean 'temperature'?); expected an OpenAI",
        ),
        ("/v1/chat/completions", {**CHAT, "queries": 1}, 400, "unknown parameter 'queries';"),
        ("/v1/route", {"text": "q", "quality": 1.5}, 400, "quality must lie in [0, 1]"),
        ("/v1/route", {"text": "q", "quality": 0.9, "budget": 0.1}, 400, "choose one"),
        ("/v1/route", {"text": "q", "budget": 0}, 400, "budget must be a number > 0"),
        ("/v1/route", {"text": "q", "guarded": "no"}, 400, "guarded: expected true or false"),
        ("/v1/chat/completions", {**CHAT, "unavailable": ["zeta"]}, 400, "unknown LLM 'zeta'"),
        ("/v1/chat/completions", {**CHAT, "pad": "x" * 30_000}, 413, "body over"),
        ("/v1/route", {"text": "a", "texts": ["b"]}, 400, "not both"),
        ("/v1/route", {"texts": ["q"] * 5}, 413, "at most 4"),
        ("/v1/route", {"texts": [""]}, 400, "empty"),
        ("/v1/route", {"text": "q", "cost_weight": -1}, 400, "cost_weight: expected a number"),
        ("/v1/route", [1, 2], 400, "JSON object"),
        (
            "/v1/route",
            {"queries": ["q"]},
            400,
            "unknown field 'queries'; expected some of text, texts, top",
        ),
        (
            "/v1/route",
            {"text": "q", "unavailble": ["a"]},
            400,
            "unknown field 'unavailble' (did you mean 'unavailable'?)",
        ),
        (
            "/v1/route",
            {},
            400,
            "expected 'text' (one query) or 'texts' (a list of queries); found neither",
        ),
        ("/v1/route", {"text": 42}, 400, "text: expected a string, found int"),
        ("/v1/route", {"text": "q", "top": 0}, 400, "top: expected a whole number >= 1, found 0"),
        ("/v1/route", {"text": "q", "top": 1.5}, 400, "top: expected a whole number >= 1"),
    ],
)
def test_bad_input_is_a_4xx_with_a_one_line_json_error(
    path: str, body: Any, status: int, message: str
) -> None:
    with fake_upstreams({"a": ["ok"], "b": ["ok"]}) as fake:
        app, _ = build(fake)
        response = post(app, path, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert message in error["message"] and "\n" not in error["message"]


def test_openai_parameters_reach_the_upstream_and_locus_fields_never_do() -> None:
    body = {
        **CHAT, "temperature": 0.2, "max_tokens": 16, "top_k": 5, "stop": ["\n"],
        "unavailable": ["b"], "max_latency_ms": 10_000, "explore": 0,
    }  # fmt: skip
    response, fake, _ = chat({"a": ["ok"]}, body)
    assert response.status_code == 200, response.text
    [sent] = fake.bodies["a"]
    assert (sent["temperature"], sent["max_tokens"], sent["top_k"]) == (0.2, 16, 5)
    assert not {"unavailable", "max_latency_ms", "explore"} & set(sent)


@pytest.mark.parametrize("model", ["locus:quality=0.95", "locus:budget=0.002", "locus:cost=10"])
def test_a_cost_rule_in_the_model_name_reaches_the_router_and_the_headers(model: str) -> None:
    response, fake, _ = chat({"d": ["ok"]}, {**CHAT, "model": model})
    assert response.status_code == 200, response.text
    # the planted router puts the cheapest LLM first under any cost rule
    assert response.headers["x-locus-llm"] == "d" and fake.requests == {"d": 1}
    assert response.headers["x-locus-p-correct"] == "0.9000"
    assert float(response.headers["x-locus-expected-cost-usd"]) == pytest.approx(0.001)


def test_accuracy_routing_reports_the_predicted_success_of_the_llm_that_answered() -> None:
    response, _, _ = chat({"a": ["500"], "b": ["ok"]})
    assert response.headers["x-locus-llm"] == "b"  # a failed: b's own prediction is reported
    assert response.headers["x-locus-p-correct"] == "0.8000"
    assert float(response.headers["x-locus-expected-cost-usd"]) == pytest.approx(0.003)


def test_without_keys_writes_are_refused() -> None:
    with fake_upstreams({"a": ["ok"]}) as fake:
        app, _ = build(fake)
        response = post(app, "/v1/llms/a/scores", {"scores": []})
    assert response.status_code == 403 and "need an API key" in response.json()["error"]["message"]


def test_malformed_json_is_a_400() -> None:
    with fake_upstreams({"a": ["ok"]}) as fake:
        app, _ = build(fake)
        response = post(
            app,
            "/v1/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 400 and "malformed JSON" in response.json()["error"]["message"]


def test_route_models_health_ready_and_metrics() -> None:
    with fake_upstreams({"a": ["ok"], "b": ["ok"]}) as fake:
        app, _ = build(fake)
        one = post(app, "/v1/route", {"text": "What is 2+2?", "unavailable": ["a"]}).json()
        assert one["llm_id"] == "b" and one["fallback_order"] == ["b", "c", "d"]
        free = post(app, "/v1/route", {"text": "What is 2+2?", "guarded": False}).json()
        assert free["llm_id"] == "b"  # the option reaches the router
        batch = post(app, "/v1/route", {"texts": ["x", "y"], "top": 2}).json()["decisions"]
        assert [len(d["ranked"]) for d in batch] == [2, 2]
        models = post(app, "/v1/models").json()
        # what a chat may name: the LLMs with an endpoint (a, b; not c, d), the cost rules
        # (a and b are priced: 0.004 and 0.003 a query), a budget of their mean
        assert models["mode"] == "gateway" and [m["id"] for m in models["data"]] == [
            "locus", "locus:quality=0.95", "locus:budget=0.0035", "locus:cost=10", "a", "b"
        ]  # fmt: skip
        assert post(app, "/health").json() == {"status": "ok"}
        assert fake.requests == {}  # none of these called an upstream
        ready = post(app, "/ready")
        assert ready.status_code == 200 and ready.json()["with_endpoint"] == 2
        post(app, "/v1/chat/completions", CHAT)
        for stray in ("/wp-admin/1", "/wp-admin/2", "/v1/nope"):
            assert post(app, stray).status_code == 404
        metrics = post(app, "/metrics").text
        assert 'locus_choices_total{llm_id="a"} 1.0' in metrics
        assert 'locus_requests_total{endpoint="/v1/route",status="200"} 3.0' in metrics
        # stray URLs are one series, not one per path
        assert 'locus_requests_total{endpoint="unmatched",status="404"} 3.0' in metrics
        assert "wp-admin" not in metrics
        assert 'locus_request_seconds_count{endpoint="/v1/route"} 3.0' in metrics


def test_404_and_405_answer_the_documented_error_shape() -> None:
    with fake_upstreams({"a": ["ok"]}) as fake:
        app, _ = build(fake)
        missing = post(app, "/v2/route", {"text": "q"})
        assert missing.status_code == 404
        assert missing.json() == {
            "error": {"message": "no such endpoint: /v2/route", "type": "not_found"}
        }
        wrong = post(app, "/v1/route")  # a GET
        assert wrong.status_code == 405
        assert wrong.json() == {
            "error": {"message": "GET is not allowed on /v1/route", "type": "method_not_allowed"}
        }


def test_ready_counts_the_upstreams_reachable_now_and_names_the_others() -> None:
    """Two of four upstreams down: after a request found them so (each call and its retry
    failed, their circuits not yet open at 3 failures), /ready counts 2 reachable (it said 4)
    and says which are not and why; a cool-down later they count again, their trial due."""
    clock = Clock()
    # patient: a loaded machine must not turn a reset into a timeout
    settings = dataclasses.replace(PATIENT, breaker_failures=3)
    scripts = {"a": ["reset"], "b": ["reset"], "c": ["ok"], "d": ["ok"]}
    with fake_upstreams(scripts) as fake:
        app, gateway = build(fake, clock, settings=settings)
        assert post(app, "/ready").json()["reachable"] == 4  # nothing known yet
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "c"
        assert gateway.breaker.state("a") == gateway.breaker.state("b") == "closed"
        ready = post(app, "/ready")
        assert ready.status_code == 200 and ready.json()["reachable"] == 2
        assert ready.json()["unreachable"] == {
            "a": "its last call failed (dropped)", "b": "its last call failed (dropped)"
        }  # fmt: skip
        clock.now += settings.breaker_cooldown_s + 1
        assert post(app, "/ready").json()["reachable"] == 4


def test_ready_is_degraded_when_no_upstream_is_reachable() -> None:
    clock = Clock()
    with fake_upstreams({"a": ["500"], "b": ["404"]}) as fake:
        app, _ = build(fake, clock)
        assert post(app, "/v1/chat/completions", CHAT).status_code == 503
        ready = post(app, "/ready")
        assert ready.status_code == 503 and ready.json()["status"] == "degraded"
        assert ready.json()["unreachable"] == {"a": "circuit open", "b": "retired"}


def test_a_routing_only_server_is_ready() -> None:
    router = ServiceRouter(RankedRouter())
    gateway = Gateway(router.rank, Upstreams({}), settings=SETTINGS)
    app = create_app(router, gateway, settings=SETTINGS)
    ready = post(app, "/ready")
    assert ready.status_code == 200
    assert ready.json()["mode"] == "routing" and ready.json()["status"] == "ready"
    assert post(app, "/v1/route", {"text": "q"}).json()["llm_id"] == "a"
    # it answers no chat: it lists the LLMs /v1/route routes among, and no routing name
    models = post(app, "/v1/models").json()
    assert models["mode"] == "routing" and [m["id"] for m in models["data"]] == list("abcd")


class HalfPricedRouter(RankedRouter):
    costs: ClassVar[dict[str, float]] = {"a": 0.004}


def test_the_model_list_names_only_what_the_gateway_serves() -> None:
    """A retired LLM leaves the list; an unpriced LLM with an endpoint takes the cost rules
    out of it (the workspace router refuses a cost rule with an unpriced candidate)."""
    with fake_upstreams({"a": ["404"], "b": ["ok"]}) as fake:
        router = ServiceRouter(HalfPricedRouter())
        gateway = Gateway(router.rank, Upstreams(fake.endpoints()), settings=SETTINGS)
        app = create_app(router, gateway, settings=SETTINGS)
        names = [m["id"] for m in post(app, "/v1/models").json()["data"]]
        assert names == ["locus", "a", "b"]  # b has no price: no cost rule
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "b"
        assert [m["id"] for m in post(app, "/v1/models").json()["data"]] == ["locus", "b"]


class PriceCheckingRouter(RankedRouter):
    """b alone priced; a cost rule over an unpriced candidate is refused, as the workspace
    router refuses it."""

    costs: ClassVar[dict[str, float]] = {"b": 0.003}

    def route_texts(
        self,
        texts: Sequence[str],
        request: RouteRequest | None = None,
        *,
        tasks: Sequence[str | None] | None = None,
        **options: Any,
    ) -> list[RouteDecision]:
        request = RouteRequest.of(request, **options)
        if request.uses_cost:
            skipped = (*request.unavailable, *self.costs)
            unpriced = [llm for llm in self.llm_ids if llm not in skipped]
            if unpriced:
                raise LocusInputError(f"no cost for {unpriced[0]!r}")
        return super().route_texts(texts, request)


def test_a_cost_rule_the_model_list_names_routes_among_the_llms_it_priced() -> None:
    """The LLMs a cost rule weighs are decided once: a retired LLM without a price leaves the
    cost rules' candidates when it leaves the model list (a cost rule was listed, then
    refused with a 400 naming the retired LLM's missing cost)."""
    with fake_upstreams({"a": ["404"], "b": ["ok"]}) as fake:
        router = ServiceRouter(PriceCheckingRouter())
        gateway = Gateway(
            router.rank, Upstreams(fake.endpoints()), settings=PATIENT,
            llm_ids=lambda: router.llm_ids,
        )  # fmt: skip
        app = create_app(router, gateway, settings=PATIENT)
        assert [m["id"] for m in post(app, "/v1/models").json()["data"]] == ["locus", "a", "b"]
        assert post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] == "b"  # a retired
        names = [m["id"] for m in post(app, "/v1/models").json()["data"]]
        assert "locus:cost=10" in names and "a" not in names
        priced = post(app, "/v1/chat/completions", {**CHAT, "model": "locus:cost=10"})
        assert priced.status_code == 200, priced.text
        assert priced.headers["x-locus-llm"] == "b" and fake.requests == {"a": 1, "b": 2}


def stream(
    scripts: dict[str, list[str]], *, hang_s: float = 1.5, settings: ServerSettings = SETTINGS
) -> tuple[httpx.Response, list[Any], FakeUpstreams]:
    """POST a streaming chat; returns the response and its SSE data items (parsed)."""
    import json

    with fake_upstreams(scripts, hang_s=hang_s) as fake:
        app, _ = build(fake, settings=settings)

        async def go() -> tuple[httpx.Response, list[Any]]:
            transport = httpx.ASGITransport(app=app)
            async with (
                httpx.AsyncClient(transport=transport, base_url="http://locus") as client,
                client.stream(
                    "POST", "/v1/chat/completions", json={**CHAT, "stream": True}
                ) as response,
            ):
                items = []
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        data = line[6:]
                        items.append(data if data == "[DONE]" else json.loads(data))
                return response, items

        response, items = asyncio.run(asyncio.wait_for(go(), timeout=20))
    return response, items, fake


def text_of(items: list[Any]) -> str:
    return "".join(
        (c["choices"][0]["delta"].get("content") or "")
        for c in items
        if isinstance(c, dict) and "choices" in c
    )


def test_a_stream_passes_through_with_the_answering_llm_as_model() -> None:
    response, items, _ = stream({"a": ["ok"], "b": ["ok"]}, settings=PATIENT)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-locus-llm"] == "a"
    assert response.headers["x-locus-upstream-model"] == "upstream-a"
    assert text_of(items) == "answer from a" and items[-1] == "[DONE]"
    assert all(c["model"] == "upstream-a" for c in items if isinstance(c, dict))


@pytest.mark.parametrize(
    ("fault", "calls"),
    [("429-long", 1), ("503", 2), ("reset", 2), ("hang", 1), ("slow", 1), ("malformed-first", 1)],
)
def test_a_stream_failing_before_its_first_token_falls_back(fault: str, calls: int) -> None:
    response, items, fake = stream({"a": [fault], "b": ["ok"]})
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "b"
    assert response.headers["x-locus-attempts"] == str(calls + 1)
    assert text_of(items) == "answer from b" and items[-1] == "[DONE]"
    assert fake.requests["a"] == calls


@pytest.mark.parametrize("fault", ["malformed", "no-done"])
def test_a_stream_with_a_malformed_chunk_or_no_done_is_still_whole(fault: str) -> None:
    """A broken chunk is skipped (and counted); a stream that closes after its finish_reason
    without [DONE] is complete: every published gateway passes both."""
    response, items, fake = stream({"a": [fault], "b": ["ok"]}, settings=PATIENT)
    assert response.status_code == 200 and response.headers["x-locus-llm"] == "a"
    assert text_of(items) == "answer from a" and items[-1] == "[DONE]"
    assert not any(isinstance(c, dict) and "error" in c for c in items)
    assert fake.requests.get("b", 0) == 0


class UnsureRouter(RankedRouter):
    """The ranking a, b, c with an uncertainty on each: a and b known well, c (a newcomer)
    from few scores, close enough to a to be plausibly the best; d surely worse."""

    spread: ClassVar[dict[str, float]] = {"a": 0.005, "b": 0.005, "c": 0.2, "d": 0.005}

    def route_texts(
        self,
        texts: Sequence[str],
        request: RouteRequest | None = None,
        *,
        tasks: Sequence[str | None] | None = None,
        **options: Any,
    ) -> list[RouteDecision]:
        decisions = super().route_texts(texts, request, tasks=tasks, **options)
        return [
            dataclasses.replace(
                d,
                ranked=tuple(
                    dataclasses.replace(c, uncertainty=self.spread[c.llm_id]) for c in d.ranked
                ),
            )
            for d in decisions
        ]


def test_exploration_sends_a_bounded_share_to_the_uncertain_llm_when_asked() -> None:
    """Off by default: every request to the best mean. With a request's `explore` share 1, a
    Thompson draw sends some to c (flagged by x-locus-explored), never to d (surely worse);
    a pinned LLM and a quality rule are never explored; a bad share is a 400."""
    import numpy as np

    scripts = {llm: ["ok"] for llm in "abcd"}
    with fake_upstreams(scripts) as fake:
        router = ServiceRouter(UnsureRouter())
        gateway = Gateway(
            router.rank, Upstreams(fake.endpoints()), prices=PRICES, settings=PATIENT,
            rng=np.random.default_rng(0),
        )  # fmt: skip
        app = create_app(router, gateway, settings=PATIENT)
        plain = [post(app, "/v1/chat/completions", CHAT) for _ in range(6)]
        assert {r.headers["x-locus-llm"] for r in plain} == {"a"}
        assert not any("x-locus-explored" in r.headers for r in plain)
        # c (0.7 +- 0.2) beats a (0.9 +- 0.005) in 17% of draws; b in none; d is never drawn
        explored = [post(app, "/v1/chat/completions", {**CHAT, "explore": 1.0}) for _ in range(60)]
        chosen = [r.headers["x-locus-llm"] for r in explored]
        assert 3 <= chosen.count("c") <= 25 and set(chosen) == {"a", "c"}, chosen
        for response, llm in zip(explored, chosen, strict=True):
            assert (response.headers.get("x-locus-explored") == "true") == (llm != "a")
        assert gateway.metrics.value("locus_explored_total", llm_id="c") == chosen.count("c")
        assert all("explore" not in body for bodies in fake.bodies.values() for body in bodies)
        pinned = [
            post(app, "/v1/chat/completions", {**CHAT, "model": "b", "explore": 1.0})
            for _ in range(10)
        ]
        assert {r.headers["x-locus-llm"] for r in pinned} == {"b"}
        quality = {**CHAT, "model": "locus:quality=0.9", "explore": 1.0}
        by_quality = [post(app, "/v1/chat/completions", quality) for _ in range(5)]
        assert {r.headers["x-locus-llm"] for r in by_quality} == {"d"}
        for bad in (1.5, -0.1, True, "0.1"):
            response = post(app, "/v1/chat/completions", {**CHAT, "explore": bad})
            assert response.status_code == 400 and "explore" in response.json()["error"]["message"]


def test_the_servers_explore_share_applies_to_every_routed_request() -> None:
    import numpy as np

    with fake_upstreams({llm: ["ok"] for llm in "abcd"}) as fake:
        router = ServiceRouter(UnsureRouter())
        settings = dataclasses.replace(PATIENT, explore=1.0)
        gateway = Gateway(
            router.rank, Upstreams(fake.endpoints()), settings=settings,
            rng=np.random.default_rng(1),
        )  # fmt: skip
        app = create_app(router, gateway, settings=settings)
        chosen = [post(app, "/v1/chat/completions", CHAT).headers["x-locus-llm"] for _ in range(30)]
        assert "c" in chosen and "a" in chosen
        off = [
            post(app, "/v1/chat/completions", {**CHAT, "explore": 0}).headers["x-locus-llm"]
            for _ in range(10)
        ]
        assert set(off) == {"a"}  # a request turns it off
    with pytest.raises(Exception, match=r"explore: expected a share of requests in \[0, 1\]"):
        ServerSettings(explore=2.0)


def test_the_decision_log_keeps_hashes_by_default_and_no_propensity_for_a_fallback(
    tmp_path: Any,
) -> None:
    """By default the log keeps a text's hash, not the text; the routed answer's logging
    probability (1: no exploration), none for an answer a fallback gave; "off" keeps none."""
    from locus.data.query_identity import text_hash
    from locus.server.decisions import DecisionLog
    from locus.store import Store

    with Store.open(tmp_path / "ws", create=True) as store:
        for scripts, setting in (({"a": ["500"], "b": ["ok"]}, "hash"), ({"a": ["ok"]}, "hash")):
            with fake_upstreams(scripts) as fake:
                router = ServiceRouter(RankedRouter())
                settings = dataclasses.replace(PATIENT, decision_log=setting)
                gateway = Gateway(
                    router.rank, Upstreams(fake.endpoints()), prices=PRICES, settings=settings
                )
                app = create_app(
                    router, gateway, settings=settings, decisions=DecisionLog(store, settings)
                )
                assert post(app, "/v1/chat/completions", CHAT).status_code == 200
        fallen, routed = store.decisions()
        assert (fallen["llm_id"], fallen["propensity"]) == ("b", None)
        assert (routed["llm_id"], routed["propensity"]) == ("a", 1.0)
        assert routed["text"] is None and routed["text_hash"] == text_hash("What is 2+2?")
        assert routed["p_correct"] == pytest.approx(0.9) and routed["cost_usd"] > 0
        # the fallback order's first candidates, among the LLMs served
        assert [r[0] for r in fallen["ranked"]] == ["a", "b"]
        off = dataclasses.replace(PATIENT, decision_log="off")
        with fake_upstreams({"a": ["ok"]}) as fake:
            router = ServiceRouter(RankedRouter())
            gateway = Gateway(router.rank, Upstreams(fake.endpoints()), prices=PRICES, settings=off)
            app = create_app(router, gateway, settings=off, decisions=DecisionLog(store, off))
            assert post(app, "/v1/chat/completions", CHAT).status_code == 200
        assert store.decision_count() == 2
