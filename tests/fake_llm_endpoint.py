"""A fake OpenAI-compatible endpoint that answers as a known LLM of a pool would: a real HTTP
server on 127.0.0.1 (bounded: it stops serving after `max_requests` and when the test ends).

Given each query's reference letter and whether the impersonated LLM got it right, it answers
the right letter where that LLM was right and a wrong one elsewhere, in the answer formats real
models write ("The answer is (C)", "**C**", "Answer: C", "C) ...", a sentence), and something
no grader can read every `unreadable_every`-th request. `key` makes it demand a bearer key;
`fail_after` makes it answer 503 from that request on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.server.fakes import serving

FORMATS = (
    "Let me think step by step. The options differ in one detail. The answer is ({letter}).",
    "**{letter}**",
    "Answer: {letter}",
    "{letter}) is the one that fits.",
    "After weighing every option, I conclude the answer is {letter}.",
)


class Impersonator:
    def __init__(
        self,
        truth: dict[str, tuple[str, bool]],
        *,
        model: str = "clone-1",
        key: str | None = None,
        fail_after: int | None = None,
        unreadable_every: int = 0,
        max_requests: int = 2000,
    ) -> None:
        self.truth = truth  # query text -> (reference letter, right?)
        self.model, self.key = model, key
        self.fail_after, self.unreadable_every = fail_after, unreadable_every
        self.max_requests = max_requests
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, text: str, count: int) -> str:
        if self.unreadable_every and count % self.unreadable_every == 0:
            return "I am not able to decide between them."
        reference, right = self.truth[text]
        letter = reference if right else "ABCD"[("ABCD".index(reference) + 1) % 4]
        return FORMATS[count % len(FORMATS)].format(letter=letter)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def send(self, status: int, payload: Any) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def authorised(self) -> bool:
                if fake.key is None or self.headers.get("authorization") == f"Bearer {fake.key}":
                    return True
                self.send(401, {"error": {"message": "invalid api key", "type": "auth"}})
                return False

            def do_GET(self) -> None:
                if not self.authorised():
                    return
                if self.path.rstrip("/") == "/v1/models":
                    self.send(200, {"object": "list", "data": [{"id": fake.model}]})
                else:
                    self.send(404, {"error": {"message": "no such route"}})

            def do_POST(self) -> None:
                if not self.authorised():
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                with fake._lock:
                    fake.requests += 1
                    count = fake.requests
                    fake.bodies.append(body)
                if count > fake.max_requests or (fake.fail_after and count > fake.fail_after):
                    self.send(503, {"error": {"message": "overloaded", "type": "server"}})
                    return
                if body.get("model") != fake.model:
                    message = f"The model `{body.get('model')}` does not exist"
                    self.send(404, {"error": {"message": message, "type": "invalid_request"}})
                    return
                text = body["messages"][-1]["content"]
                self.send(
                    200,
                    {
                        "id": f"chatcmpl-{count}", "object": "chat.completion",
                        "model": fake.model,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant",
                                                 "content": fake.answer(text, count)}}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20,
                                  "total_tokens": 120},
                    },
                )  # fmt: skip

        return Handler


@contextmanager
def impersonating(truth: dict[str, tuple[str, bool]], **options: Any) -> Iterator[Impersonator]:
    fake = Impersonator(truth, **options)
    with serving(fake.server):
        yield fake
