"""The HTTP API of `locus serve`: `create_app` (the endpoints over a loaded router and gateway)
and `build_app` (the service from a workspace).

    POST /v1/route              {"text": "..."} or {"texts": [...]}, one of quality, budget,
                                cost_weight; max_cost, unavailable, guarded (default
                                true), task (where known) -> ranked LLMs, P(correct),
                                expected cost, fallback order
    POST /v1/llms/{id}/scores   {"scores": [{query_text, score}, ...]}: onboard or refine the
                                LLM live (no retraining), kept in the store; needs a key
    POST /v1/outcomes           {"request_id": <x-locus-request-id of an answer>, "score"}
                                (or a list under "outcomes"): the answering LLM's evidence
                                (`locus.server.onboarding`); needs a key
    POST /v1/chat/completions   OpenAI-compatible, non-streaming and SSE streaming (locus's own
                                fields: unavailable, max_latency_ms, explore, task,
                                fallbacks (false, or the header x-locus-fallbacks: none:
                                no other LLM in the chosen one's place; a key created
                                --no-substitution asks it for every request that names
                                an LLM), never sent upstream; a field that is neither
                                OpenAI's nor locus's is a 400 naming it, as the OpenAI
                                API answers, so a misspelt "temperatur" is not dropped
                                unseen: `CHAT_FIELDS`); model
                                "locus", "locus:quality=S", "locus:budget=B",
                                "locus:cost=W" or an llm_id; x-locus-* headers (the
                                answering LLM, its predicted P(correct) and expected cost;
                                x-locus-unread: the parts of the last user message that
                                routing did not read, e.g. "1 image_url part"; a message
                                with no text at all needs a pinned model;
                                a stream's cost is in its usage chunk, not a header; a
                                stream broken mid-answer continues on the next LLM,
                                `locus.server.streaming`)
    GET  /v1/models             what a chat may name: `locus`, the cost rules where every
                                served LLM is priced (`locus:quality=0.95`, a
                                `locus:budget=` of their mean cost, `locus:cost=10`), the
                                LLMs with an endpoint (not retired); a routing-only server
                                (no endpoints, "mode": "routing") lists the pool's LLMs,
                                which /v1/route routes among, and no routing name
    GET  /v1/upstreams          each endpoint's recent latency (a stream's first token and
                                whole stream), error rate (broken streams count), circuit
                                state
    POST /v1/catalog/reload     re-read the LLM catalog (endpoints, prices); needs a key
    GET  /health                liveness (no upstream calls)
    GET  /ready                 the router is loaded and (a gateway) at least one LLM can be
                                reached now (not retired, its circuit not open, its latest
                                call not a failure of the last cool-down: no probes are sent,
                                calls are the evidence), with the others and why
                                ("unreachable"); a routing-only server (no endpoints) is ready
                                at once
    GET  /metrics               Prometheus (paths labelled by route, not by raw URL)

Every error, 404 and 405 included, is one JSON shape: {"error": {"message", "type"}}; bad
input is a 4xx naming the field that is wrong (an unknown field of /v1/route too), never a 5xx.
An upstream's refusal (its 4xx, e.g. a content filter) is passed on as it came, with
`x-locus-llm`, `x-locus-request-id` and `x-locus-attempts`; a chat no LLM answered says its
attempts and `x-locus-failed`. A chat answer's `model` is what the upstream answered as;
`x-locus-llm` names the pool's LLM, `x-locus-upstream-model` the upstream model,
`x-locus-failed` the LLMs tried before it, `x-locus-explored: true` an answer whose LLM was
drawn by exploration (`explore`: a share of requests in [0, 1], the server's
`ServerSettings.explore` by default, 0 off).

    >>> app = build_app(Store.open(".locus"))                            # doctest: +SKIP

`app_from_env` is the factory uvicorn calls in each worker process (`--workers N`): it reads
the workspace and artifact from LOCUS_SERVE_WORKSPACE / LOCUS_ARTIFACT.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from locus.data.llm_catalog import Endpoint
from locus.errors import LocusInputError
from locus.server.canary_watch import CanaryWatch
from locus.server.decisions import DecisionLog
from locus.server.fallback import GatewayError
from locus.server.gateway import Gateway
from locus.server.http_io import (
    ChatQuery,
    add_error_answers,
    answer_headers,
    auth_refusal,
    error_response,
    gateway_error_response,
    parse_chat_body,
    predicted_headers,
    read_json_body,
    unread_words,
)
from locus.server.onboard_jobs import OnboardJobs, endpoint_onboarding
from locus.server.onboarding import LiveOnboarding, OutcomeLog, add_onboarding_routes
from locus.server.service_router import ROUTING_MODEL, ServiceRouter, add_route_route
from locus.server.settings import ServerSettings
from locus.server.status_routes import add_status_routes
from locus.server.upstream import Upstreams
from locus.store import Store
from locus.store.keys import ApiKey

__all__ = [
    "SERVE_WORKSPACE_ENV",
    "SETTINGS_ENV",
    "app_from_env",
    "build_app",
    "create_app",
    "read_catalog",
]

# set by `locus serve --workers N` for its worker processes: the store to open (may hold a password)
SERVE_WORKSPACE_ENV = "LOCUS_SERVE_WORKSPACE"
SETTINGS_ENV = "LOCUS_SERVE_SETTINGS"  # and the server settings, as JSON
# a chat request's header that asks for no substitution: "none" (as the body's "fallbacks":
# false, for clients that cannot add a body field)
NO_FALLBACK_HEADER = "x-locus-fallbacks"


def create_app(
    router: ServiceRouter,
    gateway: Gateway,
    *,
    settings: ServerSettings | None = None,
    verify_key: Callable[[str], ApiKey | None] | None = None,
    onboarding: LiveOnboarding | None = None,
    reload_catalog: Callable[[], dict[str, Any]] | None = None,
    onboard_jobs: OnboardJobs | None = None,
    decisions: DecisionLog | None = None,
    canary: CanaryWatch | None = None,
) -> FastAPI:
    """The FastAPI app over a loaded router and gateway (nothing is loaded per request).

    `verify_key` (the store's `verify_key`) checks `Authorization: Bearer <key>` on every
    /v1 request; None serves without keys (`locus serve --no-auth`, loopback only), where
    writes are refused."""
    settings = settings or gateway.settings
    app = FastAPI(title="locus", docs_url=None, redoc_url=None, openapi_url=None)
    outcome_log = OutcomeLog(elsewhere=None if decisions is None else decisions.resolve)
    known = set(router.llm_ids)  # what a request's `unavailable` may name
    _add_guards(app, gateway, settings, verify_key)
    add_error_answers(app)
    add_status_routes(app, router, gateway, reload_catalog, canary)
    add_route_route(app, router, settings, known)
    _add_chat_route(app, gateway, settings, known, outcome_log, decisions)
    add_onboarding_routes(
        app, settings=settings, router=router, known=known, outcome_log=outcome_log,
        onboarding=onboarding, jobs=onboard_jobs,
        logged_outcome=None if decisions is None else decisions.outcome,
    )  # fmt: skip
    return app


def _add_guards(
    app: FastAPI,
    gateway: Gateway,
    settings: ServerSettings,
    verify_key: Callable[[str], ApiKey | None] | None,
) -> None:
    """What every request passes first: the API key, the body bound, the last-line 500, and
    its count and time in the metrics."""
    metrics = gateway.metrics

    @app.middleware("http")
    async def bounded(request: Request, call_next: Any) -> Response:
        started = time.perf_counter()
        length = request.headers.get("content-length")
        denied = auth_refusal(request, verify_key)
        if denied is not None:
            response = denied
        elif length is not None and length.isdigit() and int(length) > settings.max_body_bytes:
            response = error_response(
                413, f"body over {settings.max_body_bytes:,} bytes", "too_large"
            )
        else:
            try:
                response = await call_next(request)
            except Exception:  # the last line: a bug answers 500 in JSON, never a trace
                response = error_response(500, "internal error", "internal")
        # label by the matched route's template: a stray URL must not become a new series
        route = request.scope.get("route")
        label = getattr(route, "path", None) or "unmatched"
        metrics.requests.labels(label, str(response.status_code)).inc()
        metrics.request_seconds.labels(label).observe(time.perf_counter() - started)
        return response


def _p_correct(predicted: Any) -> float | None:
    """The answering LLM's predicted P(correct), None where not known (a pinned answer)."""
    p = None if predicted is None else predicted.p_correct
    return None if p is None or p != p else float(p)


def _add_chat_route(
    app: FastAPI,
    gateway: Gateway,
    settings: ServerSettings,
    known: set[str],
    outcome_log: OutcomeLog,
    decisions: DecisionLog | None = None,
) -> None:
    """POST /v1/chat/completions: an answer (or an SSE stream) through the gateway, with the
    x-locus-* headers and a request id its outcome can be posted for; each answer's decision
    kept in the decision log (`locus.server.decisions`) where there is one."""

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        data = await read_json_body(request, settings.max_body_bytes)
        query = parse_chat_body(data, known)  # locus's own fields taken out of `data`
        if request.headers.get(NO_FALLBACK_HEADER, "").strip().lower() in ("none", "false", "0"):
            query = replace(query, fallbacks=False)
        key = getattr(request.state, "api_key", None)
        model = data.get("model")
        pinned = isinstance(model, str) and model.partition(":")[0] != ROUTING_MODEL
        if not pinned and not query.text.strip():
            held = f" (it holds {unread_words(query.unread)})" if query.unread else ""
            raise LocusInputError(
                f"messages: the last user message has no text to route on{held}; name an LLM "
                "in model to send it to that LLM as it is"
            )
        if key is not None and not key.substitute and pinned:
            query = replace(query, fallbacks=False)  # a key that asked: pinned means pinned
        try:
            if data.get("stream"):
                return await stream(data, query)
            return await answer(data, query)
        except GatewayError as error:
            llm = error.llm_id  # a refusal: its outcome may be posted too
            request_id = None if llm is None else outcome_log.record(llm, query.text, None)
            return gateway_error_response(error, request_id)

    async def stream(data: dict[str, Any], query: ChatQuery) -> Response:
        text = query.text
        started = time.perf_counter()
        streamed = await gateway.stream(
            data, text, unavailable=query.unavailable, max_latency_ms=query.max_latency_ms,
            explore=query.explore, task=query.task, fallbacks=query.fallbacks,
        )  # fmt: skip
        request_id = outcome_log.record(streamed.llm_id, text, _p_correct(streamed.predicted))
        if decisions is not None:  # the latency to its first token; a stream's cost is unknown
            first_token_ms = 1000 * (time.perf_counter() - started)
            await decisions.record(request_id, streamed, text, first_token_ms, None)
        return StreamingResponse(
            streamed.events,
            media_type="text/event-stream",
            headers={
                "x-locus-request-id": request_id,
                "x-locus-llm": streamed.llm_id,
                "x-locus-attempts": str(streamed.attempts),
                **answer_headers(streamed.upstream_model, streamed.failed, streamed.explored),
                **predicted_headers(streamed.predicted),
                **_unread_header(query),
                "cache-control": "no-cache",
            },
        )

    async def answer(data: dict[str, Any], query: ChatQuery) -> Response:
        text = query.text
        started = time.perf_counter()
        answered = await gateway.chat(
            data, text, unavailable=query.unavailable, max_latency_ms=query.max_latency_ms,
            explore=query.explore, task=query.task, fallbacks=query.fallbacks,
        )  # fmt: skip
        request_id = outcome_log.record(answered.llm_id, text, _p_correct(answered.predicted))
        if decisions is not None:
            latency_ms = 1000 * (time.perf_counter() - started)
            await decisions.record(request_id, answered, text, latency_ms, answered.cost_usd)
        headers = {
            "x-locus-request-id": request_id,
            "x-locus-llm": answered.llm_id,
            "x-locus-attempts": str(answered.attempts),
            **answer_headers(answered.upstream_model, answered.failed, answered.explored),
            **predicted_headers(answered.predicted),
            **_unread_header(query),
        }
        if answered.cost_usd is not None:  # no prices: no header, never an empty one
            headers["x-locus-cost-usd"] = f"{answered.cost_usd:.8f}"
        return JSONResponse(answered.payload, headers=headers)


def _unread_header(query: ChatQuery) -> dict[str, str]:
    """x-locus-unread: what the choice of LLM did not read (the parts of the last user
    message that are not text); they went upstream as they came."""
    return {"x-locus-unread": unread_words(query.unread)} if query.unread else {}


def read_catalog(
    store: Store, llm_ids: Sequence[str]
) -> tuple[dict[str, Endpoint], dict[str, dict[str, Any]]]:
    """The pool's LLMs in the workspace's catalog (`locus import llms`): the endpoints of those
    that have one, and every LLM's metadata (its prices: the cost of an answer)."""
    catalog = store.llm_metadata()
    prices = {llm: dict(catalog.get(llm, {})) for llm in llm_ids}
    endpoints = {}
    for llm in llm_ids:
        endpoint = Endpoint.from_json(prices[llm].get("endpoint"))
        if endpoint is not None:
            endpoints[llm] = endpoint
    return endpoints, prices


def build_app(
    store: Store,
    artifact: str = "default",
    *,
    settings: ServerSettings | None = None,
    transport: Any = None,
    auth: bool = True,
) -> FastAPI:
    """The app over the workspace's router; LLMs without an endpoint are routed to by
    /v1/route but never called by /v1/chat/completions."""
    from locus.pipeline.workspace_router import WorkspaceRouter

    settings = settings or ServerSettings()
    max_age_s = settings.outcome_max_age_days * 86_400 or None
    workspace_router = WorkspaceRouter(store, artifact, outcome_max_age_s=max_age_s)
    # the window of outcomes moves at each re-read, at least every hundredth of it
    step = max(60.0, max_age_s / 100) if max_age_s else None

    def pool_version() -> object:
        # replicas sharing the store see each other's onboarded LLMs within `pool_check_s`
        version = store.embeddings_version(artifact)
        return version if step is None else (version, int(time.time() // step))

    router = ServiceRouter(
        workspace_router, pool_version=pool_version, check_every_s=settings.pool_check_s
    )
    endpoints, prices = read_catalog(store, router.llm_ids)
    gateway = Gateway(
        router.rank,
        Upstreams(endpoints, transport=transport),
        prices=prices,
        settings=settings,
        llm_ids=lambda: router.llm_ids,
    )
    onboarding = LiveOnboarding(
        store, workspace_router, artifact, max_rows=10_000,
        refresh_every_s=settings.outcome_refresh_s, drift=gateway.drift,
        metrics=gateway.metrics, on_drift=settings.on_drift,
    )  # fmt: skip

    def reload_catalog() -> dict[str, Any]:
        return gateway.set_catalog(*read_catalog(store, router.llm_ids))

    canary = None
    if settings.canary_every_s > 0:
        canary = CanaryWatch(
            store, settings.canary_every_s, metrics=gateway.metrics,
            on_alarm=onboarding.endpoint_changed,
        )  # fmt: skip

    app = create_app(
        router, gateway, settings=settings, verify_key=store.verify_key if auth else None,
        onboarding=onboarding, reload_catalog=reload_catalog,
        onboard_jobs=OnboardJobs(
            endpoint_onboarding(store, artifact, workspace_router, reload_catalog)
        ),
        decisions=DecisionLog(store, settings), canary=canary,
    )  # fmt: skip
    app.state.reload_catalog = reload_catalog  # `locus serve` reloads on SIGHUP too
    app.state.router = router
    app.state.canary = canary
    if canary is not None:
        canary.start()
    return app


def app_from_env() -> FastAPI:
    """The app of one worker process of `locus serve --workers N`, from its environment."""
    workspace = os.environ.get(SERVE_WORKSPACE_ENV)
    if not workspace:
        raise LocusInputError(
            f"{SERVE_WORKSPACE_ENV} is not set; start the service with locus serve"
        )
    store = Store.open(workspace, create=False)
    given = os.environ.get(SETTINGS_ENV)
    return build_app(
        store,
        os.environ.get("LOCUS_ARTIFACT", "default"),
        auth=os.environ.get("LOCUS_NO_AUTH") != "1",
        settings=ServerSettings.from_json(given) if given else None,
    )
