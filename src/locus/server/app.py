"""`create_app`: the HTTP API of `locus serve`.

    POST /v1/route              {"text": "..."} or {"texts": [...]}, one of quality, budget,
                                cost_weight; max_cost, unavailable, guarded (default
                                true) -> ranked LLMs, P(correct), expected cost, fallback
                                order
    POST /v1/llms/{id}/scores   {"scores": [{query_text, score}, ...]}: onboard or refine the
                                LLM live (no retraining), kept in the store; needs a key
    POST /v1/outcomes           {"request_id": <x-locus-request-id of an answer>, "score"}
                                (or a list under "outcomes"): the answering LLM's evidence
                                (`locus.server.outcomes`); needs a key
    POST /v1/chat/completions   OpenAI-compatible, non-streaming and SSE streaming (locus's own
                                fields: unavailable, max_latency_ms, explore, never sent
                                upstream; a field that is neither OpenAI's nor locus's is a
                                400 naming it, as the OpenAI API answers, so a misspelt
                                "temperatur" is not dropped unseen: `CHAT_FIELDS`); model
                                "locus", "locus:quality=S", "locus:budget=B",
                                "locus:cost=W" or an llm_id; x-locus-* headers (the
                                answering LLM, its predicted P(correct) and expected cost;
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
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from locus.errors import LocusError
from locus.routing.rules import DecisionRule
from locus.server.gateway import ROUTING_MODEL, Gateway, GatewayError
from locus.server.onboard_jobs import add_onboard_routes
from locus.server.requests import (
    BadRequest,
    check_chat_fields,
    non_negative,
    read_json_body,
    unavailable_llms,
)
from locus.server.responses import answer_headers, error_response, predicted_headers, text_of
from locus.server.service_router import ServiceRouter
from locus.server.settings import ServerSettings

__all__ = ["ROUTE_FIELDS", "ServiceRouter", "create_app"]

# what a /v1/route body may hold; anything else is a 400 naming it
ROUTE_FIELDS = (
    "text",
    "texts",
    "top",
    "cost_weight",
    "quality",
    "budget",
    "max_cost",
    "unavailable",
    "guarded",
)


def _round_up(usd: float) -> str:
    """`usd` rounded up to two significant digits, as text.

    >>> _round_up(0.0035), _round_up(0.00123), _round_up(0.001), _round_up(123.0)
    ('0.0035', '0.0013', '0.001', '130')
    """
    decimals = 1 - math.floor(math.log10(usd))
    rounded = math.ceil(usd * 10**decimals - 1e-9) / 10**decimals
    text = f"{rounded:.{max(decimals, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def create_app(
    router: ServiceRouter,
    gateway: Gateway,
    *,
    settings: ServerSettings | None = None,
    verify_key: Callable[[str], str | None] | None = None,
    onboarding: Any = None,
    reload_catalog: Callable[[], dict[str, Any]] | None = None,
    onboard_jobs: Any = None,
) -> FastAPI:
    """The FastAPI app over a loaded router and gateway (nothing is loaded per request).

    `verify_key` (the store's `verify_key`) checks `Authorization: Bearer <key>` on every
    /v1 request; None serves without keys (`locus serve --no-auth`, loopback only), where
    writes are refused."""
    settings = settings or gateway.settings
    metrics = gateway.metrics
    from locus.server.outcomes import OutcomeLog, parse_outcomes

    outcome_log = OutcomeLog()
    app = FastAPI(title="locus", docs_url=None, redoc_url=None, openapi_url=None)
    known = set(router.llm_ids)

    def refused(request: Request) -> Response | None:
        """The 401/403 answer for a request that may not pass, or None."""
        path = request.url.path
        if not path.startswith("/v1/"):
            return None
        write = request.method == "POST" and (
            path.startswith("/v1/llms/") or path in ("/v1/outcomes", "/v1/catalog/reload")
        )
        if verify_key is None:
            if write:
                return error_response(
                    403, "writes need an API key; this server runs --no-auth", "forbidden"
                )
            return None
        header = request.headers.get("authorization", "")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            return error_response(
                401, "missing API key: send Authorization: Bearer <key>", "unauthorized"
            )
        if verify_key(secret.strip()) is None:
            return error_response(401, "unknown or revoked API key", "unauthorized")
        return None

    @app.middleware("http")
    async def bounded(request: Request, call_next: Any) -> Response:
        started = time.perf_counter()
        length = request.headers.get("content-length")
        denied = refused(request)
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

    def served_llms() -> list[str]:
        """What a chat may name: the LLMs with an endpoint, not retired (the pool's order)."""
        served = gateway.upstreams.endpoints
        pool = [llm for llm in router.llm_ids if llm in served]
        pool += sorted(set(served) - set(pool))  # an endpoint outside the pool is served too
        return [llm for llm in pool if llm not in gateway.retired]

    def priced_rules(llm_ids: list[str]) -> list[str]:
        """The decision rules /v1/models lists: the cost rules only where every LLM of
        `llm_ids` (those a cost rule weighs in the gateway) is priced; a budget of their mean
        cost per query (rounded up: at least the cheapest routing's), where it is not 0."""
        costs = router.costs_of(llm_ids)
        if costs is None:
            return []
        mean = sum(costs.values()) / len(costs)
        budget = [f"budget={_round_up(mean)}"] if mean > 0 else []
        return ["quality=0.95", *budget, "cost=10"]

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> Response:
        return error_response(500, "internal error", "internal")

    @app.exception_handler(BadRequest)
    async def bad(request: Request, error: BadRequest) -> Response:
        return error_response(error.status, str(error), error.kind)

    @app.exception_handler(LocusError)
    async def locuserror_response(request: Request, error: LocusError) -> Response:
        return error_response(400, str(error), "invalid_request")

    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(StarletteHTTPException)
    async def httperror_response(request: Request, error: StarletteHTTPException) -> Response:
        kinds = {404: "not_found", 405: "method_not_allowed"}
        message = {
            404: f"no such endpoint: {request.url.path}",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(error.status_code, str(error.detail))
        return error_response(
            error.status_code, message, kinds.get(error.status_code, "http_error")
        )

    def gateway_error(error: GatewayError, text: str | None = None) -> Response:
        """The answer to a chat no LLM answered, with what is known of how it came about: an
        upstream's refusal as it came, naming its LLM (and, for the routed `text`, a request
        id), and the attempts and failures of any request that called upstreams."""
        if error.kind == "refused" and isinstance(error.body, dict):
            response: Response = JSONResponse(error.body, status_code=error.status)
        else:
            response = error_response(error.status, str(error), error.kind)
        if error.llm_id is not None:
            if text is not None:
                response.headers["x-locus-request-id"] = outcome_log.record(error.llm_id, text)
            response.headers["x-locus-llm"] = error.llm_id
        if error.attempts:
            response.headers["x-locus-attempts"] = str(error.attempts)
        response.headers.update(answer_headers(None, error.failed))
        return response

    @app.exception_handler(GatewayError)
    async def gatewayerror_response(request: Request, error: GatewayError) -> Response:
        return gateway_error(error)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    def unreachable(llm: str) -> str | None:
        """Why `llm`'s upstream cannot be reached now, or None. The server sends no probes:
        its calls are the evidence. A circuit whose cool-down has passed counts as
        reachable, its trial due: a server whose every upstream failed once would otherwise
        stay unready, and never be sent the request that shows they are back."""
        if llm in gateway.retired:
            return "retired"
        state = gateway.breaker.state(llm)
        if state == "open":
            return "circuit open"
        failure = gateway.breaker.last_failure(llm)
        if state == "closed" and failure is not None:
            return f"its last call failed ({failure})"
        return None

    @app.get("/ready")
    async def ready() -> Response:
        served = gateway.upstreams.endpoints
        down = {llm: why for llm in sorted(served) if (why := unreachable(llm)) is not None}
        mode = "gateway" if served else "routing"  # no endpoint: /v1/route only, ready at once
        up = len(down) < len(served) or not served
        body = {
            "status": "ready" if up else "degraded",
            "mode": mode,
            "llms": len(router.llm_ids),
            "with_endpoint": len(served),
            "reachable": len(served) - len(down),
            "unreachable": down,
            "retired": sorted(gateway.retired),
        }
        return JSONResponse(body, status_code=200 if up else 503)

    @app.get("/v1/upstreams")
    async def upstreams() -> dict[str, Any]:
        """Each LLM with an endpoint: recent latency (p50 / p90 ms; a stream's to its first
        token), a whole stream's (stream_p50_ms / stream_p90_ms), error rate (a stream broken
        or stalled after its first token counts as an error), circuit state, retired or not."""
        measured = gateway.latency.snapshot()
        unmeasured = {
            "calls": 0, "error_rate": None, "p50_ms": None, "p90_ms": None,
            "stream_p50_ms": None, "stream_p90_ms": None,
        }  # fmt: skip
        return {
            "upstreams": [
                {
                    "llm_id": llm,
                    "model": endpoint.model,
                    "circuit": gateway.breaker.state(llm),
                    "retired": llm in gateway.retired,
                    **measured.get(llm, unmeasured),
                }
                for llm, endpoint in sorted(gateway.upstreams.endpoints.items())
            ]
        }

    @app.get("/metrics")
    async def prometheus() -> Response:
        content, kind = metrics.render()
        return Response(content, media_type=kind)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        now = int(time.time())
        if gateway.upstreams.endpoints:
            llms = served_llms()
            rules = priced_rules(llms)
            names = [ROUTING_MODEL, *(f"{ROUTING_MODEL}:{rule}" for rule in rules), *llms]
            mode = "gateway"
        else:  # no chat is served: the LLMs /v1/route routes among
            names, mode = list(router.llm_ids), "routing"
        return {
            "object": "list",
            "mode": mode,
            "data": [
                {"id": n, "object": "model", "created": now, "owned_by": "locus"} for n in names
            ],
        }

    @app.post("/v1/route")
    async def route(request: Request) -> dict[str, Any]:
        data = await read_json_body(request, settings.max_body_bytes)
        unknown = [name for name in data if name not in ROUTE_FIELDS]
        if unknown:
            import difflib

            close = difflib.get_close_matches(unknown[0], ROUTE_FIELDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise BadRequest(
                400,
                f"unknown field {unknown[0]!r}{hint}; expected some of {', '.join(ROUTE_FIELDS)}",
                "invalid_request",
            )
        if "text" in data and "texts" in data:
            raise BadRequest(
                400, "expected 'text' (one query) or 'texts' (a list), not both", "invalid_request"
            )
        if "text" not in data and "texts" not in data:
            raise BadRequest(
                400,
                "expected 'text' (one query) or 'texts' (a list of queries); found neither",
                "invalid_request",
            )
        if "text" in data and not isinstance(data["text"], str):
            found = type(data["text"]).__name__
            raise BadRequest(400, f"text: expected a string, found {found}", "invalid_request")
        texts = [data["text"]] if "text" in data else data["texts"]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise BadRequest(400, "texts: expected a non-empty list of strings", "invalid_request")
        if len(texts) > settings.max_batch:
            raise BadRequest(
                413, f"batch of {len(texts):,} texts; at most {settings.max_batch:,}", "too_large"
            )
        if any(not t.strip() for t in texts):
            raise BadRequest(
                400, "a text is empty; expected query text to route", "invalid_request"
            )
        top = data.get("top", settings.top)
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise BadRequest(
                400, f"top: expected a whole number >= 1, found {top!r}", "invalid_request"
            )
        weight = non_negative(data, "cost_weight", 0.0) or 0.0
        quality = non_negative(data, "quality", None)
        budget = non_negative(data, "budget", None)
        DecisionRule(cost_weight=weight, quality=quality, budget=budget)  # one rule, in range
        max_cost = non_negative(data, "max_cost", None)
        unavailable = unavailable_llms(known, data.get("unavailable"))
        guarded = data.get("guarded", True)
        if not isinstance(guarded, bool):
            raise BadRequest(400, "guarded: expected true or false", "invalid_request")

        # one routing call: the whole ranking is the fallback order, its head the answer
        decisions = await anyio.to_thread.run_sync(
            lambda: router.decide(
                texts, top=len(router.llm_ids), cost_weight=weight, quality=quality,
                budget=budget, max_cost=max_cost, unavailable=unavailable, guarded=guarded,
            )
        )  # fmt: skip
        answers = [
            {
                **replace(d, ranked=d.ranked[:top]).as_dict(),
                "fallback_order": [c.llm_id for c in d.ranked],
            }
            for d in decisions
        ]
        return {"decisions": answers} if "texts" in data else answers[0]

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        data = await read_json_body(request, settings.max_body_bytes)
        check_chat_fields(data)
        if "messages" not in data:
            raise BadRequest(400, "messages: required", "invalid_request")
        text = text_of(data["messages"])
        unavailable = unavailable_llms(known, data.pop("unavailable", None))
        max_latency = data.pop("max_latency_ms", None)  # locus's own field: not sent upstream
        if max_latency is not None and (
            isinstance(max_latency, bool)
            or not isinstance(max_latency, int | float)
            or max_latency <= 0
        ):
            raise BadRequest(
                400, "max_latency_ms: expected a number of milliseconds > 0", "invalid_request"
            )
        explore = data.pop("explore", None)  # locus's own field: this request's share
        if explore is not None and (
            isinstance(explore, bool)
            or not isinstance(explore, int | float)
            or not 0 <= explore <= 1
        ):
            raise BadRequest(
                400, "explore: expected a share in [0, 1] (0: route to the best mean)",
                "invalid_request",
            )  # fmt: skip
        try:
            return await answer_chat(data, text, unavailable, max_latency, explore)
        except GatewayError as error:
            return gateway_error(error, text)

    async def answer_chat(
        data: dict[str, Any], text: str, unavailable: list[str], max_latency: float | None,
        explore: float | None,
    ) -> Response:  # fmt: skip
        if data.get("stream"):
            streamed = await gateway.stream(
                data, text, unavailable=unavailable, max_latency_ms=max_latency, explore=explore
            )
            return StreamingResponse(
                streamed.events,
                media_type="text/event-stream",
                headers={
                    "x-locus-request-id": outcome_log.record(streamed.llm_id, text),
                    "x-locus-llm": streamed.llm_id,
                    "x-locus-attempts": str(streamed.attempts),
                    **answer_headers(streamed.upstream_model, streamed.failed, streamed.explored),
                    **predicted_headers(streamed.predicted),
                    "cache-control": "no-cache",
                },
            )
        answer = await gateway.chat(
            data, text, unavailable=unavailable, max_latency_ms=max_latency, explore=explore
        )
        headers = {
            "x-locus-request-id": outcome_log.record(answer.llm_id, text),
            "x-locus-llm": answer.llm_id,
            "x-locus-attempts": str(answer.attempts),
            **answer_headers(answer.upstream_model, answer.failed, answer.explored),
            **predicted_headers(answer.predicted),
        }
        if answer.cost_usd is not None:  # no prices: no header, never an empty one
            headers["x-locus-cost-usd"] = f"{answer.cost_usd:.8f}"
        return JSONResponse(answer.payload, headers=headers)

    @app.post("/v1/catalog/reload")
    async def catalog_reload() -> dict[str, Any]:
        """Re-read the workspace's LLM catalog (after `locus import llms`): endpoints added,
        changed or removed, prices; no restart."""
        if reload_catalog is None:
            raise BadRequest(
                501, "this server was started without a workspace to reload", "unsupported"
            )
        changed: dict[str, Any] = await anyio.to_thread.run_sync(reload_catalog)
        return changed

    @app.post("/v1/outcomes")
    async def post_outcomes(request: Request) -> dict[str, Any]:
        if onboarding is None:
            raise BadRequest(
                501, "this server was started without a workspace to write to", "unsupported"
            )
        data = await read_json_body(request, settings.max_body_bytes)
        try:
            rows = parse_outcomes(data, outcome_log)
        except KeyError as error:
            raise BadRequest(404, str(error.args[0]), "not_found") from None
        except ValueError as error:
            raise BadRequest(400, str(error), "invalid_request") from None
        unknown = sorted({row["llm_id"] for row in rows} - set(router.llm_ids))
        if unknown:
            raise BadRequest(400, f"outcome for unknown LLM {unknown[0]!r}", "invalid_request")
        result: dict[str, Any] = await anyio.to_thread.run_sync(onboarding.add_outcomes, rows)
        return result

    @app.post("/v1/llms/{llm_id}/scores")
    async def post_scores(llm_id: str, request: Request) -> Response:
        if onboarding is None:
            raise BadRequest(
                501, "this server was started without a workspace to write to", "unsupported"
            )
        data = await read_json_body(request, settings.max_body_bytes)
        onboarding.validate(llm_id, data)  # bad input answers before any thread work
        report = await anyio.to_thread.run_sync(onboarding.post, llm_id, data)
        known.add(llm_id)
        return report

    add_onboard_routes(app, onboard_jobs)
    return app
