"""The service's status routes: GET /health, /ready, /v1/upstreams (each endpoint's latency,
errors, circuit, outcomes and drift alarm, canary), /metrics, /v1/models; POST
/v1/catalog/reload. What the service serves and how its upstreams are doing, without calling
them (`create_app` adds them)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from locus.server.canary_watch import CanaryWatch
from locus.server.gateway import Gateway
from locus.server.http_io import BadRequest
from locus.server.service_router import ROUTING_MODEL, ServiceRouter, cost_rules

__all__ = ["add_status_routes"]


def add_status_routes(
    app: FastAPI,
    router: ServiceRouter,
    gateway: Gateway,
    reload_catalog: Callable[[], dict[str, Any]] | None,
    canary: CanaryWatch | None = None,
) -> None:
    """GET /health, /ready, /v1/upstreams, /metrics, /v1/models; POST /v1/catalog/reload:
    what the service serves and how its upstreams are doing (no upstream calls)."""

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/ready")
    async def ready() -> Response:
        served = gateway.upstreams.endpoints
        down = {llm: why for llm in sorted(served) if (why := gateway.unreachable(llm)) is not None}
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
        # each LLM's outcomes beside its predicted P(correct), and its drift alarm
        drift = gateway.drift.as_dict()
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
                    "outcomes": drift.get(llm),
                    "canary": None if canary is None else canary.state(llm),
                }
                for llm, endpoint in sorted(gateway.upstreams.endpoints.items())
            ]
        }

    @app.get("/metrics")
    async def prometheus() -> Response:
        content, kind = gateway.metrics.render()
        return Response(content, media_type=kind)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        now = int(time.time())
        if gateway.upstreams.endpoints:
            pool = router.llm_ids
            rules = cost_rules(router.costs_of(gateway.cost_candidates(pool)))
            names = [
                ROUTING_MODEL,
                *(f"{ROUTING_MODEL}:{rule}" for rule in rules),
                *gateway.served_llms(pool),
            ]
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
