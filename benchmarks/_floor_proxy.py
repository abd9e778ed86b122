"""The floor of a gateway's overhead: a bare proxy (Starlette + one httpx client) that forwards
each chat completion to one upstream, `LOCUS_FLOOR_UPSTREAM` (no routing, no log, no checks).
`bench_serve.py` serves it with uvicorn in its own process, as it serves `locus serve`, and
waits for its /health.
"""

from __future__ import annotations

import os

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

UPSTREAM = os.environ["LOCUS_FLOOR_UPSTREAM"]
client = httpx.AsyncClient(timeout=60)


async def forward(request: Request) -> Response:
    answer = await client.post(
        UPSTREAM, content=await request.body(), headers={"content-type": "application/json"}
    )
    return Response(answer.content, answer.status_code, media_type="application/json")


async def health(request: Request) -> Response:
    return PlainTextResponse("ok")


app = Starlette(
    routes=[
        Route("/v1/chat/completions", forward, methods=["POST"]),
        Route("/health", health),
    ]
)
