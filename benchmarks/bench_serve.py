"""Load on `locus serve`: throughput and gateway overhead against fake upstreams with a fixed
latency, then the same while the upstream of the most-routed LLM is killed mid-run.

    python benchmarks/bench_serve.py [--requests 5000] [--concurrency 32] [--latency-ms 50]
    python benchmarks/bench_serve.py --only pinned     # the pinned-LLM figures alone

Uses a copy of the MMLU-Pro workspace of bench_accuracy.py (29 LLMs, the default LOCUS+kNN
artifact of seed 0), every LLM given an endpoint on one of two fake upstream servers (uvicorn,
127.0.0.1; `locus serve` runs in its own process): the server of the most-routed LLM, and the
server of all the others. Each request
is a chat completion for an MMLU-Pro test question (stored texts: their vectors are cached) or
a new text (encoded on the way; a fifth as many requests). Overhead = the gateway's latency
minus the latency of the same load sent straight to a fake upstream, percentile by percentile,
at the given concurrency and one request at a time (200 each). A pinned request (model = the
most-routed LLM's llm_id) is measured one at a time too, on stored and new texts: it needs no
routing until its LLM fails, so a new text costs it no encoding; and so is the floor of any
gateway's overhead here, a bare proxy to the upstream (`_floor_proxy.py`: Starlette and httpx,
nothing else). The load generator, the gateway and the fake upstreams share the machine's
cores. Writes results/serve.json (results/serve-pinned.json with --only pinned).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO_ROOT, report

ARTIFACT = "bench-all-MiniLM-L6-v2-onnx-int8-seed0"


def fake_upstream(latency_s: float) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def complete(request: Request) -> JSONResponse:
        body = await request.json()
        await asyncio.sleep(latency_s)
        llm = request.path_params["llm"]
        return JSONResponse({
            "id": "x", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": f"answer from {llm}"}}],
            "usage": {"prompt_tokens": 200, "completion_tokens": 50, "total_tokens": 250},
        })  # fmt: skip

    return Starlette(routes=[Route("/{llm}/v1/chat/completions", complete, methods=["POST"])])


class Served:
    """An ASGI app on a real uvicorn server on 127.0.0.1 in a thread."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", backlog=512)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


class ServeProcess:
    """A server in its own process on 127.0.0.1, ready once its /health answers 200:
    `locus serve --no-auth` as it is deployed (`ServeProcess.locus`: not sharing this
    process's interpreter lock with the load generator and the fake upstreams), or the bare
    proxy of `_floor_proxy.py` (`ServeProcess.floor`)."""

    def __init__(self, command: Callable[[int], list[str]], env: dict[str, str] | None = None):
        import os
        import socket
        import subprocess

        import httpx

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        argv = command(port)
        self.process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{argv[0]} did not answer /health within 120 s")

    @classmethod
    def locus(cls, workspace: Path, artifact: str, options: Sequence[str] = ()) -> ServeProcess:
        locus = Path(sys.executable).parent / "locus"
        return cls(
            lambda port: [str(locus), "serve", "--no-auth", "--port", str(port),
                          "-w", str(workspace), "--artifact", artifact, *options]
        )  # fmt: skip

    @classmethod
    def floor(cls, upstream: str) -> ServeProcess:
        """The bare proxy to `upstream` (a chat completions URL)."""
        return cls(
            lambda port: [sys.executable, "-m", "uvicorn", "benchmarks._floor_proxy:app",
                          "--port", str(port), "--log-level", "error"],
            {"LOCUS_FLOOR_UPSTREAM": upstream},
        )  # fmt: skip

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


async def load(
    url: str,
    bodies: list[dict[str, Any]],
    concurrency: int,
    *,
    on_progress: Any = None,
    path: str | None = None,
) -> dict[str, Any]:
    """Send `bodies` with `concurrency` clients to `path` (default: the chat completions of
    `url`); latencies, statuses, lost requests, fallbacks."""
    import httpx

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    answered_by: dict[str, int] = {}
    fallbacks = 0
    lost = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(bodies)):
        queue.put_nowait(i)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def worker() -> None:
            nonlocal fallbacks, lost
            while not queue.empty():
                i = queue.get_nowait()
                if on_progress is not None:
                    on_progress(i)
                began = time.perf_counter()
                try:
                    target = path or (
                        "/chat/completions" if "/v1" in url else "/v1/chat/completions"
                    )
                    response = await client.post(target, json=bodies[i])
                except httpx.HTTPError:
                    lost += 1
                    continue
                latencies.append(time.perf_counter() - began)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                llm = response.headers.get("x-locus-llm")
                if llm:
                    answered_by[llm] = answered_by.get(llm, 0) + 1
                if response.headers.get("x-locus-attempts", "1") != "1":
                    fallbacks += 1

        started = time.perf_counter()
        await asyncio.gather(*[worker() for _ in range(concurrency)])
        seconds = time.perf_counter() - started
    ms = np.array(latencies) * 1000
    return {
        "requests": len(bodies), "seconds": seconds, "throughput_per_s": len(bodies) / seconds,
        "p50_ms": float(np.percentile(ms, 50)), "p90_ms": float(np.percentile(ms, 90)),
        "p99_ms": float(np.percentile(ms, 99)), "statuses": statuses, "lost": lost,
        "fallbacks": fallbacks,
        "answered_by_top3": dict(sorted(answered_by.items(), key=lambda kv: -kv[1])[:3]),
    }  # fmt: skip


def route_figures(
    url: str, texts: list[str], rng: np.random.Generator, concurrency: int
) -> dict[str, Any]:
    """/v1/route alone (no upstream): single texts and batches of 64, stored and new texts,
    one client and `concurrency` clients; texts routed per second."""
    figures: dict[str, Any] = {}
    for batch in (1, 64):
        for new in (False, True):
            for clients in (1, concurrency):
                requests = 400 if batch == 1 else (16 if new else 40)
                payloads = []
                for r in range(requests):
                    picked = rng.choice(len(texts), size=batch)
                    chosen = [
                        texts[i] + (f" (route {clients}-{r}-{k})" if new else "")
                        for k, i in enumerate(picked)
                    ]  # new texts: unique to this run, so never in the gateway's cache
                    payloads.append({"texts": chosen} if batch > 1 else {"text": chosen[0]})
                run = asyncio.run(load(url, payloads, clients, path="/v1/route"))
                run["texts_per_s"] = run["throughput_per_s"] * batch
                name = f"{'batch64' if batch > 1 else 'single'}_{'new' if new else 'stored'}"
                figures[f"{name}_c{clients}"] = run
    return figures


def pinned_figures(
    gateway_url: str, upstream_url: str, top: str, direct: list[dict[str, Any]], bodies: Any
) -> dict[str, Any]:
    """One request at a time: straight to the upstream, routed (`locus`) and pinned (model =
    `top`, an llm_id) through the gateway, stored and new texts; overhead against the
    upstream alone, percentile by percentile."""
    figures: dict[str, Any] = {
        "direct_sequential_pinned": asyncio.run(load(f"{upstream_url}/{top}/v1", direct[:200], 1))
    }
    # the floor: a bare proxy to the same upstream (no routing, no log, no checks)
    floor = ServeProcess.floor(f"{upstream_url}/{top}/v1/chat/completions")
    try:
        figures["floor_sequential_proxy"] = asyncio.run(load(floor.url, direct[:200], 1))
    finally:
        floor.stop()
    for name, new in (("stored", False), ("new", True)):
        routed = bodies(200, new)
        figures[f"gateway_sequential_routed_{name}"] = asyncio.run(load(gateway_url, routed, 1))
        pinned = [{**body, "model": top} for body in bodies(200, new)]
        figures[f"gateway_sequential_pinned_{name}"] = asyncio.run(load(gateway_url, pinned, 1))
    base = figures["direct_sequential_pinned"]
    for name, run in figures.items():
        if name.startswith(("gateway_", "floor_")):
            run["overhead_p50_ms"] = run["p50_ms"] - base["p50_ms"]
            run["overhead_p99_ms"] = run["p99_ms"] - base["p99_ms"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument(
        "--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy" / "mmlu-pro"
    )
    parser.add_argument("--artifact", default=ARTIFACT, help="e.g. default, on the demo's .locus")
    parser.add_argument(
        "--only", choices=["pinned"], help="only the pinned-LLM figures (one request at a time)"
    )
    parser.add_argument(
        "--serve-option",
        action="append",
        default=[],
        help="An option of locus serve, e.g. --serve-option=--decision-log=off (repeatable).",
    )
    parser.add_argument("--tag", default="", help="Suffix of the result name.")
    args = parser.parse_args()
    artifact = args.artifact
    from locus.data.llm_catalog import Endpoint
    from locus.pipeline.data import workspace_table
    from locus.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "artifacts").mkdir(parents=True)
        shutil.copy(args.workspace / "locus.db", ws / "locus.db")
        shutil.copytree(args.workspace / "artifacts" / artifact, ws / "artifacts" / artifact)
        latency = args.latency_ms / 1000
        primary, others = Served(fake_upstream(latency)), Served(fake_upstream(latency))
        with Store.open(ws, create=False) as store:
            data = workspace_table(store)
            texts = [data.table.query_texts[i] for i in data.rows("test")]
            from locus.pipeline.workspace_router import WorkspaceRouter

            probe = WorkspaceRouter(store, artifact)
            top = probe.route_texts([texts[0]])[0].llm_id

            def endpoint(llm: str) -> str:
                url = primary.url if llm == top else others.url
                return Endpoint(f"{url}/{llm}/v1", llm).to_json()

            store.upsert_llm_metadata(
                [
                    (llm, {"endpoint": endpoint(llm), "price_in_per_mtok": 1.0})
                    for llm in probe.llm_ids
                ]
            )
            gateway = ServeProcess.locus(ws, artifact, args.serve_option)
            rng = np.random.default_rng(0)

            def bodies(n: int, new: bool) -> list[dict[str, Any]]:
                picked = rng.choice(len(texts), size=n)
                suffix = [f" (variant {k})" if new else "" for k in range(n)]
                return [
                    {"model": "locus", "messages": [{"role": "user", "content": texts[i] + end}]}
                    for i, end in zip(picked, suffix, strict=True)
                ]

            figures: dict[str, Any] = {
                "llms": len(probe.llm_ids), "most_routed": top, "latency_ms": args.latency_ms,
                "concurrency": args.concurrency,
            }  # fmt: skip
            n = args.requests
            direct = [{**b, "model": top} for b in bodies(n, False)]
            if args.only == "pinned":
                figures.update(pinned_figures(gateway.url, primary.url, top, direct, bodies))
                gateway.stop()
                others.stop()
                primary.stop()
                report(f"serve-pinned{args.tag}", figures)
                return
            figures["direct_to_upstream"] = asyncio.run(
                load(f"{primary.url}/{top}/v1", direct, args.concurrency)
            )
            figures["gateway_stored_texts"] = asyncio.run(
                load(gateway.url, bodies(n, False), args.concurrency)
            )
            figures["gateway_new_texts"] = asyncio.run(
                load(gateway.url, bodies(max(n // 5, 100), True), args.concurrency)
            )
            # one request at a time: the gateway's own time, without queueing on shared cores
            figures["direct_sequential"] = asyncio.run(
                load(f"{primary.url}/{top}/v1", direct[:200], 1)
            )
            for name, new in (
                ("gateway_sequential_stored", False),
                ("gateway_sequential_new", True),
            ):
                figures[name] = asyncio.run(load(gateway.url, bodies(200, new), 1))
            figures.update(pinned_figures(gateway.url, primary.url, top, direct, bodies))
            figures["route"] = route_figures(gateway.url, texts, rng, args.concurrency)
            killed_at = n // 4

            def kill(i: int) -> None:
                if i == killed_at:
                    threading.Thread(target=primary.stop, daemon=True).start()

            figures["gateway_primary_killed"] = asyncio.run(
                load(gateway.url, bodies(n, False), args.concurrency, on_progress=kill)
            )
            figures["gateway_primary_killed"]["killed_after_requests"] = killed_at
            base = figures["direct_to_upstream"]
            for name, reference in (
                ("gateway_stored_texts", base), ("gateway_new_texts", base),
                ("gateway_sequential_stored", figures["direct_sequential"]),
                ("gateway_sequential_new", figures["direct_sequential"]),
            ):  # fmt: skip
                run = figures[name]
                run["overhead_p50_ms"] = run["p50_ms"] - reference["p50_ms"]
                run["overhead_p99_ms"] = run["p99_ms"] - reference["p99_ms"]
            gateway.stop()
            others.stop()
            primary.stop()
    figures["serve_options"] = args.serve_option
    report(f"serve{args.tag}", figures)


if __name__ == "__main__":
    main()
