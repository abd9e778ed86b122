"""Onboarding an endpoint while serving (`OnboardJobs`): `POST /v1/llms/{id}/onboard` starts
`locus.pipeline.onboard.onboard_llm` in a background thread; `GET /v1/llms/{id}/onboard` reads
its progress, then its report or its error (the routes: `locus.server.onboarding`).

    POST /v1/llms/{id}/onboard  {"base_url": ..., "model": ..., "api_key_env": ..., "n": 32,
                                 "strategy": "random"}     -> 202 {"status": "running", ...}
    GET  /v1/llms/{id}/onboard  -> {"status": "running" | "done" | "failed", "asked", "total",
                                    "report" | "error"}

The API key of the endpoint is never sent in a request: `api_key_env` names the server's
environment variable holding it (as the catalog does). When the job is done the router re-reads
the pool and the gateway its catalog, so the next request can route to the new LLM.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from locus.data.llm_catalog import Endpoint
from locus.errors import LocusError, LocusInputError
from locus.store import Store

__all__ = ["FIELDS", "OnboardJobs", "endpoint_onboarding"]

FIELDS = {"base_url", "model", "api_key_env", "n", "strategy", "seed"}


class OnboardJobs:
    """One onboarding job per LLM at a time; `run(job)` does the work (in a thread)."""

    def __init__(self, run: Callable[[str, dict[str, Any], Callable[..., Any]], dict[str, Any]]):
        self._run = run
        self._jobs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def start(self, llm_id: str, body: Any) -> dict[str, Any]:
        """Validate `body` and start the job; its first status.

        Raises:
            LocusInputError: a malformed body.
            KeyError: a job for `llm_id` is running.
        """
        options = _options(body)
        with self._lock:
            if self._jobs.get(llm_id, {}).get("status") == "running":
                raise KeyError(llm_id)
            job: dict[str, Any] = {
                "llm_id": llm_id, "status": "running", "asked": 0, "total": None,
                "started_at": time.time(), "options": options,
            }  # fmt: skip
            self._jobs[llm_id] = job
        threading.Thread(target=self._work, args=(llm_id, job), daemon=True).start()
        return self.status(llm_id) or {}

    def status(self, llm_id: str) -> dict[str, Any] | None:
        with self._lock:
            job = self._jobs.get(llm_id)
            return None if job is None else {k: v for k, v in job.items() if k != "options"}

    def _work(self, llm_id: str, job: dict[str, Any]) -> None:
        @contextmanager
        def progress(description: str, total: int | None = None) -> Iterator[Any]:
            with self._lock:
                job["total"] = total

            def advance(n: int) -> None:
                with self._lock:
                    job["asked"] += n

            yield advance

        outcome: dict[str, Any]
        try:
            report = self._run(llm_id, job["options"], progress)
        except LocusError as error:
            outcome = {"status": "failed", "error": " ".join(str(error).split())}
        except Exception as error:  # the job's thread must say why it ended
            outcome = {"status": "failed", "error": f"{type(error).__name__}: {error}"}
        else:
            outcome = {"status": "done", "report": report}
        with self._lock:
            job.update(outcome, finished_at=time.time())


def _options(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise LocusInputError("onboard: expected a JSON object with base_url (and model, n)")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise LocusInputError(
            f"onboard: unknown field {unknown[0]!r}; expected {', '.join(sorted(FIELDS))}"
        )
    base_url = body.get("base_url")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise LocusInputError("onboard: base_url must be an http(s) URL of an OpenAI-style API")
    for name in ("model", "api_key_env", "strategy"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise LocusInputError(f"onboard: {name} must be text")
    for name, low, high in (("n", 1, 1000), ("seed", 0, 2**31)):
        value = body.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high
        ):
            raise LocusInputError(f"onboard: {name} must be an integer in [{low}, {high}]")
    return dict(body)


def endpoint_onboarding(
    store: Store, artifact: str, router: Any, reload_catalog: Callable[[], Any]
) -> Callable[[str, dict[str, Any], Callable[..., Any]], dict[str, Any]]:
    """What an `OnboardJobs` job runs: `onboard_llm` on the endpoint of its options, then the
    `router` (the workspace router) re-reads the pool and the gateway its catalog."""

    def onboard(llm_id: str, options: dict[str, Any], progress: Any) -> dict[str, Any]:
        from locus.pipeline.onboard import onboard_llm

        key_env = options.get("api_key_env")
        api_key = os.environ.get(key_env) if key_env else None
        if key_env and not api_key:
            raise LocusInputError(
                f"onboard: api_key_env {key_env} is not set in the server's environment"
            )
        report = onboard_llm(
            store, llm_id, Endpoint(options["base_url"], options.get("model") or llm_id, key_env),
            api_key=api_key, n=options.get("n", 32), strategy=options.get("strategy", "random"),
            seed=options.get("seed", 0), artifact=artifact, progress=progress,
        )  # fmt: skip
        router.refresh()
        reload_catalog()
        return report.as_dict()

    return onboard
