"""Fake OpenAI-compatible upstreams: a real HTTP server on 127.0.0.1, scripted per LLM.

Each LLM's endpoint is `http://127.0.0.1:<port>/<name>/v1`; its script is a list of
behaviours used one per request (the last repeats): "ok", "429" (Retry-After: 1), "429-long"
(Retry-After: 60), "500", "503", "reset", "close" (the connection closed cleanly without an
answer), "hang" (answers after `hang_s`), "context" (400
context length), "filter" (400 content filter), "garbage" (200, not JSON), "404" and "410"
(model not found / retired). Streaming requests ("stream": true) answer "ok" as SSE, and also:
"slow" (no first chunk for `hang_s`), "cut" (the connection reset after the first words),
"stall" (nothing for `hang_s` after the first words), "malformed" (a broken chunk after the
first words, then the rest of the answer), "malformed-first" (only a broken first chunk),
"no-done" (every chunk, the finish_reason, a clean close without [DONE]), "truncated" (the
first words, then a clean close: no finish_reason, no [DONE]), "reset-after-finish" (every
chunk, the finish_reason, then a reset instead of [DONE]). A whole stream asked for
`stream_options.include_usage` ends with a usage chunk (100 prompt, 7 completion tokens).
"cut:N", "stall:N" and "truncated:N" send N words of their own ("a0 ", "a1 ", ... for LLM a)
before they break;
"prefill-400" answers a request whose last message is the assistant's with a 400 (as an API
that does not take a prefill does), any other request as "ok"; "prefill-400-restart" and
"prefill-400-reword" refuse a prefill the same way, and answer the quoted form by starting the
answer over (S14): streaming the quoted partial text again, then "rest from <name>"
("restart"), or its first two thirds, then other words ("reword"). "echo:P" answers each
prompt as LLM P would, one answer per prompt (a canary's endpoint: `fake.scripts[name] =
["echo:other"]` swaps what answers behind a name).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from locus.data.llm_catalog import Endpoint

# a reset makes the receiver drop what it has not read yet: a stream broken after its words
# waits this long first, so that the words sent reach the gateway (without it, 1 run in ~6
# lost them and looked broken before its first token)
READ_PAUSE_S = 0.2


def reset(connection: socket.socket) -> None:
    """Close with a TCP reset (linger 0), as a crashed upstream does."""
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    connection.close()


STREAMED = {
    "ok", "slow", "cut", "stall", "malformed", "malformed-first", "no-done", "truncated",
    "reset-after-finish", "restart", "reword",
}  # fmt: skip


class FakeUpstreams:
    def __init__(self, scripts: dict[str, list[str]], *, hang_s: float = 2.0) -> None:
        self.scripts = {name: list(script) for name, script in scripts.items()}
        self.hang_s = hang_s
        self.requests: dict[str, int] = defaultdict(int)
        self.bodies: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]

    def endpoints(self) -> dict[str, Endpoint]:
        return {
            name: Endpoint(f"http://127.0.0.1:{self.port}/{name}/v1", f"upstream-{name}", None)
            for name in self.scripts
        }

    def next_behaviour(self, name: str) -> str:
        with self._lock:
            script = self.scripts[name]
            count = self.requests[name]
            self.requests[name] += 1
            return script[min(count, len(script) - 1)]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                # the gateway hanging up first is what a timeout test asks for
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.serve()

            def serve(self) -> None:
                name = self.path.strip("/").split("/")[0]
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.bodies[name].append(body)
                behaviour = fake.next_behaviour(name)
                if behaviour == "reset":
                    reset(self.connection)
                    return
                if behaviour == "close":  # a clean close, no answer
                    self.close_connection = True
                    return
                if behaviour == "hang":
                    time.sleep(fake.hang_s)
                    behaviour = "ok"
                if behaviour.startswith("prefill-400"):
                    last = (body.get("messages") or [{}])[-1]
                    refused = last.get("role") == "assistant"
                    then = behaviour.removeprefix("prefill-400").lstrip("-") or "ok"
                    behaviour = "prefill-refused" if refused else then
                if body.get("stream") and behaviour.split(":")[0] in STREAMED:
                    fake.stream(self, name, behaviour, body)
                    return
                status, payload, headers = fake.answer(name, behaviour, body)
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        return Handler

    def stream(
        self, handler: BaseHTTPRequestHandler, name: str, behaviour: str, body: dict[str, Any]
    ) -> None:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data = {"id": f"chatcmpl-{name}", "object": "chat.completion.chunk",
                    "model": body.get("model"),
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
            return b"data: " + json.dumps(data).encode() + b"\n\n"

        def send(raw: bytes) -> None:
            handler.wfile.write(raw)
            handler.wfile.flush()

        def usage() -> None:  # where asked for: a last chunk with no choices and the usage
            if (body.get("stream_options") or {}).get("include_usage"):
                tokens = {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107}
                send(b"data: " + json.dumps({"id": f"chatcmpl-{name}", "choices": [],
                                             "usage": tokens}).encode() + b"\n\n")  # fmt: skip

        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.end_headers()
        if ":" in behaviour:  # N words of its own, then the break
            kind, words = behaviour.split(":")
            send(chunk({"role": "assistant", "content": ""}))
            for i in range(int(words)):
                send(chunk({"content": f"{name}{i} "}))
            if kind == "cut":
                time.sleep(READ_PAUSE_S)
                reset(handler.connection)
            elif kind == "stall":
                time.sleep(self.hang_s)
            return
        if behaviour in ("restart", "reword"):
            quoted = str(body["messages"][-1]["content"])
            partial = quoted.split('"""\n', 1)[1].rsplit('\n"""', 1)[0]
            again = partial if behaviour == "restart" else partial[: 2 * len(partial) // 3]
            send(chunk({"role": "assistant", "content": ""}))
            for word in again.split(" "):
                if word:
                    send(chunk({"content": word + " "}))
            send(chunk({"content": f"rest from {name}" if behaviour == "restart" else "but"}))
            send(chunk({"content": " in other words"}))
            send(chunk({}, "stop"))
            usage()
            send(b"data: [DONE]\n\n")
            return
        if behaviour == "malformed-first":
            send(b"data: {not json\n\n")
            return
        send(chunk({"role": "assistant", "content": ""}))
        if behaviour == "slow":
            time.sleep(self.hang_s)
        send(chunk({"content": "answer "}))
        if behaviour == "cut":
            time.sleep(READ_PAUSE_S)
            reset(handler.connection)
            return
        if behaviour == "stall":
            time.sleep(self.hang_s)
        if behaviour == "malformed":
            send(b"data: {broken\n\n")
        if behaviour == "truncated":
            return
        send(chunk({"content": f"from {name}"}))
        send(chunk({}, "stop"))
        if behaviour == "reset-after-finish":
            time.sleep(READ_PAUSE_S)
            reset(handler.connection)
        elif behaviour != "no-done":
            usage()
            send(b"data: [DONE]\n\n")

    def answer(
        self, name: str, behaviour: str, body: dict[str, Any]
    ) -> tuple[int, Any, dict[str, str]]:
        if behaviour.startswith("echo:"):
            persona = behaviour.removeprefix("echo:")
            prompt = str((body.get("messages") or [{}])[-1].get("content", ""))
            said = hashlib.sha256(f"{persona}\x1f{prompt}".encode()).hexdigest()[:24]
            return 200, {
                "id": f"chatcmpl-{name}", "object": "chat.completion", "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"{persona}: {said}"}}],
            }, {}  # fmt: skip
        if behaviour == "ok":
            return 200, {
                "id": f"chatcmpl-{name}",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [
                    {"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": f"answer from {name}"}}
                ],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500},
            }, {}  # fmt: skip
        if behaviour in ("429", "429-long"):
            return (
                429,
                {"error": {"message": "slow down", "type": "rate_limit"}},
                {"retry-after": "1" if behaviour == "429" else "60"},
            )
        if behaviour in ("404", "410"):
            error = {"message": f"The model `{body.get('model')}` does not exist", "type": "x"}
            return int(behaviour), {"error": error}, {}
        if behaviour in ("500", "503"):
            return int(behaviour), {"error": {"message": "oops", "type": "server"}}, {}
        if behaviour == "context":
            error = {"code": "context_length_exceeded", "message": "maximum context length is 8k"}
            return 400, {"error": error}, {}
        if behaviour == "prefill-refused":
            error = {"message": "the last message must be a user or tool message", "type": "x"}
            return 400, {"error": error}, {}
        if behaviour == "filter":
            error = {"code": "content_filter", "message": "blocked by the content filter"}
            return 400, {"error": error}, {}
        if behaviour == "garbage":
            return 200, b"<html>not json</html>", {}
        raise ValueError(behaviour)


@contextmanager
def fake_upstreams(
    scripts: dict[str, list[str]], *, hang_s: float = 2.0
) -> Iterator[FakeUpstreams]:
    fake = FakeUpstreams(scripts, hang_s=hang_s)
    with serving(fake.server):
        yield fake


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[None]:
    """Serve `server` (bound to 127.0.0.1) in a thread until the block ends, then close it."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
