"""Learning while serving: scores posted for an LLM, outcomes of answers, endpoints onboarded.

Scores posted for an LLM (new or known; `POST /v1/llms/{id}/scores`) refine or create its
embedding with no retraining, visible to the next routed request and kept in the store
(`LiveOnboarding`): they are imported like any file (source `api`, one transaction), new query
texts are encoded, the LLM is re-embedded from all its stored non-test scores
(`embed_workspace_llms`: the LLM encoder, loaded on the first post) and the router re-reads
the pool.

Outcomes: every chat answer carries `x-locus-request-id`; the replica that answered remembers
which LLM answered which text for its last `capacity` requests (`OutcomeLog`). `POST
/v1/outcomes` with `{"request_id", "score"}` (or `{"llm_id", "query_text", "score"}`, which any
replica can take) stores the score as that LLM's on that query, in the source `outcomes`, and
re-embeds the LLMs it concerns: at once, or on a schedule (`ServerSettings.outcome_refresh_s`:
every that many seconds, in a background thread, the LLMs with outcomes since the last
refresh). Replicas on one PostgreSQL store follow the new embeddings like any onboarding.

Onboarding an endpoint: `POST /v1/llms/{id}/onboard` starts a job, `GET` reads it
(`locus.server.onboard_jobs`, which runs them). Every write needs an API key (`create_app`); a
server without a workspace answers them 501.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pandas as pd
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from locus.data.batch import ImportBatch
from locus.data.query_identity import text_hash
from locus.errors import LocusInputError
from locus.pipeline.workspace_router import OUTCOMES_SOURCE
from locus.routing.drift import DriftMonitor
from locus.server.http_io import BadRequest, error_response, read_json_body
from locus.server.metrics import Metrics
from locus.server.onboard_jobs import OnboardJobs
from locus.server.service_router import ServiceRouter
from locus.server.settings import ServerSettings
from locus.store import Store

__all__ = ["LiveOnboarding", "OutcomeLog", "add_onboarding_routes", "parse_outcomes"]

logger = logging.getLogger("locus.server")

NO_WORKSPACE = "this server was started without a workspace to write to"
SOURCE = "api"


class LiveOnboarding:
    """`post(llm_id, rows)` for the service; one post at a time (they write the store)."""

    def __init__(
        self,
        store: Store,
        router: Any,
        artifact: str,
        *,
        max_rows: int,
        refresh_every_s: float = 0.0,
        drift: DriftMonitor | None = None,
        metrics: Metrics | None = None,
        on_drift: str = "discount",
    ) -> None:
        self.store, self.router, self.artifact, self.max_rows = store, router, artifact, max_rows
        self.refresh_every_s = refresh_every_s
        self.drift, self.metrics, self.on_drift = drift, metrics, on_drift
        self._lock = threading.Lock()
        self._pending: set[str] = set()  # LLMs with outcomes not yet in their embedding
        self._timer: threading.Timer | None = None

    def validate(self, llm_id: str, body: Any) -> pd.DataFrame:
        """The posted scores as canonical rows; LocusInputError names the first bad one."""
        rows = body.get("scores") if isinstance(body, dict) else None
        if not isinstance(rows, list) or not rows:
            raise LocusInputError(
                "scores: expected a non-empty list of {query_text, score} objects"
            )
        if len(rows) > self.max_rows:
            raise LocusInputError(f"scores: {len(rows):,} rows; at most {self.max_rows:,} per post")
        records = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise LocusInputError(f"scores[{i}]: expected an object with query_text and score")
            text, score = row.get("query_text"), row.get("score")
            if not isinstance(text, str) or not text.strip():
                raise LocusInputError(f"scores[{i}]: query_text must be non-empty text")
            if (
                isinstance(score, bool)
                or not isinstance(score, (int, float))
                or not 0 <= score <= 1
            ):
                raise LocusInputError(f"scores[{i}]: score {score!r}; expected a number in [0, 1]")
            query_id = row.get("query_id") or text_hash(text)[:16]
            records.append(
                {"llm_id": llm_id, "query_id": str(query_id), "query_text": text,
                 "score": float(score)}
            )  # fmt: skip
        return pd.DataFrame(records)

    def post(self, llm_id: str, body: Any) -> dict[str, Any]:
        frame = self.validate(llm_id, body)
        from locus.pipeline.embed import embed_workspace_llms
        from locus.text.cache import encode_missing

        with self._lock:
            batch = ImportBatch.from_long(
                frame, source=SOURCE, origin=f"POST /v1/llms/{llm_id}/scores"
            )
            imported = self.store.write_batch(batch, kind="table", replace=True)
            encode_missing(self.store, self.router.vectors.text_encoder)
            [report] = embed_workspace_llms(self.store, [llm_id], name=self.artifact)
            self.router.refresh()
        return {
            "llm_id": llm_id,
            "posted": len(frame),
            "new_scores": imported.new_scores,
            "replaced_scores": imported.replaced_scores,
            "embedding": report.as_dict(),
        }

    def add_outcomes(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Store outcome rows {llm_id, query_text, score} (source `outcomes`; a later outcome
        for the same LLM and text overwrites the earlier) and re-embed their LLMs: at once, or
        within `refresh_every_s` in the background."""
        if len(rows) > self.max_rows:
            raise LocusInputError(f"outcomes: {len(rows):,} rows; at most {self.max_rows:,}")
        from locus.text.cache import encode_missing

        frame = pd.DataFrame(rows)
        frame["query_id"] = [text_hash(t)[:16] for t in frame["query_text"]]
        llms = sorted(set(frame["llm_id"]))
        with self._lock:
            alarms = self._test_drift(frame)
            frame = frame.drop(columns=["predicted"], errors="ignore")
            batch = ImportBatch.from_long(frame, source=OUTCOMES_SOURCE, origin="POST /v1/outcomes")
            imported = self.store.write_batch(batch, kind="table", replace=True)
            encode_missing(self.store, self.router.vectors.text_encoder)
            self._pending.update(llms)
            if self.refresh_every_s <= 0:
                refreshed = self._refresh_pending()
            else:
                refreshed = []
                if self._timer is None:
                    self._timer = threading.Timer(self.refresh_every_s, self._scheduled)
                    self._timer.daemon = True
                    self._timer.start()
        return {
            "recorded": len(frame),
            "llms": llms,
            "new_scores": imported.new_scores,
            "replaced_scores": imported.replaced_scores,
            "refreshed": refreshed,
            "refresh_in_s": None if refreshed else self.refresh_every_s,
            "drift_alarms": alarms,
        }

    def _test_drift(self, frame: pd.DataFrame) -> list[str]:
        """Each outcome read by the drift test against its LLM's P(correct) when it answered
        (else the router's now, before the outcome is read into it); the LLMs whose alarm it
        raised, logged, counted and, with `on_drift` "discount", discounted in the router."""
        if self.drift is None:
            return []
        predicted = (
            frame["predicted"].to_numpy(float, na_value=np.nan)
            if "predicted" in frame
            else np.full(len(frame), np.nan)
        )
        missing = np.flatnonzero(np.isnan(predicted))
        if len(missing):
            texts = [str(frame["query_text"].iloc[i]) for i in missing]
            proba = self.router.predict_proba(self.router.vectors_for(texts))
            ids = list(self.router.llm_ids)
            for row, i in enumerate(missing):
                llm = frame["llm_id"].iloc[i]
                predicted[i] = proba[row, ids.index(llm)] if llm in ids else np.nan
        raised = []
        for llm, p, score in zip(frame["llm_id"], predicted, frame["score"], strict=True):
            if self.metrics is not None:
                self.metrics.outcomes.labels(llm).inc()
            if np.isnan(p):
                continue
            if self.drift.update(llm, float(p), float(score)):
                raised.append(llm)
            state = self.drift.state(llm)
            if self.metrics is not None:
                self.metrics.drift_statistic.labels(llm).set(state.statistic)
                self.metrics.drift_alarm.labels(llm).set(1.0 if state.alarm else 0.0)
        for llm in raised:
            said = self.drift.state(llm).as_dict()
            logger.warning(
                "drift alarm: %s answers worse than predicted since its outcome %d (%d outcomes: "
                "rate %.2f against %.2f predicted; the last %d: %.2f against %.2f); %s",
                llm, said["since"] + 1, said["outcomes"], said["rate"], said["predicted"],
                len(self.drift.state(llm).recent), said["recent_rate"],
                said["recent_predicted"],
                "its evidence from before is discounted" if self.on_drift == "discount"
                else "alert only (on_drift)",
            )  # fmt: skip
            if self.on_drift == "discount":  # its outcomes since the change are kept
                state = self.drift.state(llm)
                self.router.discount(llm, since_change=state.outcomes - state.since)
        return raised

    def endpoint_changed(self, llm_id: str) -> None:
        """A canary alarm (`locus.server.canary_watch`): with `on_drift` "discount", `llm_id`'s
        evidence of the fit leaves its votes (`WorkspaceRouter.discount`), read again now."""
        if self.on_drift != "discount":
            return
        with self._lock:
            self.router.discount(llm_id)
            self.router.refresh()

    def _refresh_pending(self) -> list[str]:
        """Re-embed the LLMs with outcomes since the last refresh (called under the lock)."""
        from locus.pipeline.embed import embed_workspace_llms

        llms = sorted(self._pending)
        if llms:
            embed_workspace_llms(self.store, llms, name=self.artifact)
            self.router.refresh()
        self._pending.clear()
        return llms

    def _scheduled(self) -> None:
        with self._lock:
            self._timer = None
            self._refresh_pending()


class OutcomeLog:
    """request id -> (llm_id, query text, its predicted P(correct) or None) of the last
    `capacity` answers; `elsewhere` resolves the others where it can (the decision log, where
    it keeps texts)."""

    def __init__(
        self,
        capacity: int = 100_000,
        elsewhere: Callable[[str], tuple[str, str, float | None] | None] | None = None,
    ) -> None:
        self.capacity = capacity
        self._answers: OrderedDict[str, tuple[str, str, float | None]] = OrderedDict()
        self._lock = threading.Lock()
        self._elsewhere = elsewhere  # the decision log's resolve: other replicas, restarts

    def record(self, llm_id: str, text: str, predicted: float | None = None) -> str:
        request_id = uuid.uuid4().hex
        with self._lock:
            self._answers[request_id] = (llm_id, text, predicted)
            while len(self._answers) > self.capacity:
                self._answers.popitem(last=False)
        return request_id

    def resolve(self, request_id: str) -> tuple[str, str, float | None] | None:
        with self._lock:
            found = self._answers.get(request_id)
        if found is None and self._elsewhere is not None:
            found = self._elsewhere(request_id)
        return found


def parse_outcomes(body: Any, log: OutcomeLog) -> list[dict[str, Any]]:
    """The outcomes of a POST body as rows {llm_id, query_text, score, predicted} (predicted:
    the answering LLM's P(correct) when it answered, where the request id tells it).

    Raises:
        ValueError: a malformed body, a score outside [0, 1], an unknown request id (the
            message says what is wrong, for a 400 or 404).
        KeyError: a request id this replica does not remember (a 404).
    """
    items = body.get("outcomes") if isinstance(body, dict) and "outcomes" in body else [body]
    if not isinstance(items, list) or not items:
        raise ValueError("outcomes: expected a non-empty list of {request_id, score} objects")
    rows = []
    for i, item in enumerate(items):
        where = f"outcomes[{i}]" if isinstance(body, dict) and "outcomes" in body else "outcome"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object with request_id and score")
        unknown = sorted(set(item) - {"request_id", "llm_id", "query_text", "score"})
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r}")
        score = item.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
            raise ValueError(f"{where}: score {score!r}; expected a number in [0, 1]")
        if "request_id" in item:
            found = log.resolve(str(item["request_id"]))
            if found is None:
                raise KeyError(
                    f"{where}: unknown request_id {item['request_id']!r}; this server remembers "
                    f"its last {log.capacity:,} answers (another replica answered it, or it is "
                    "older): post llm_id and query_text instead"
                )
            llm_id, text, predicted = found
        else:
            given_llm, given_text = item.get("llm_id"), item.get("query_text")
            if (
                not isinstance(given_llm, str)
                or not isinstance(given_text, str)
                or not given_text.strip()
            ):
                raise ValueError(f"{where}: expected request_id, or llm_id and query_text")
            llm_id, text, predicted = given_llm, given_text, None
        rows.append(
            {"llm_id": llm_id, "query_text": text, "score": float(score), "predicted": predicted}
        )
    return rows


def add_onboarding_routes(
    app: FastAPI,
    *,
    settings: ServerSettings,
    router: ServiceRouter,
    known: set[str],
    outcome_log: OutcomeLog,
    onboarding: LiveOnboarding | None,
    jobs: OnboardJobs | None,
    logged_outcome: Callable[[str, float], bool] | None = None,
) -> None:
    """POST /v1/llms/{id}/scores, POST /v1/outcomes, POST and GET /v1/llms/{id}/onboard on
    `app` (501 where the server has no workspace to write to). `known`: the LLMs a chat's
    `unavailable` may name; one whose scores are posted joins it. `logged_outcome`: an
    outcome posted by request id is also set in the decision log."""

    def unsupported() -> Response:
        return error_response(501, NO_WORKSPACE, "unsupported")

    @app.post("/v1/outcomes")
    async def post_outcomes(request: Request) -> dict[str, Any]:
        if onboarding is None:
            raise BadRequest(501, NO_WORKSPACE, "unsupported")
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
        if logged_outcome is not None:
            items = data.get("outcomes") if "outcomes" in data else [data]
            for item in items or []:
                if "request_id" in item:
                    request_id, score = str(item["request_id"]), float(item["score"])
                    await anyio.to_thread.run_sync(logged_outcome, request_id, score)
        return result

    @app.post("/v1/llms/{llm_id}/scores")
    async def post_scores(llm_id: str, request: Request) -> dict[str, Any]:
        if onboarding is None:
            raise BadRequest(501, NO_WORKSPACE, "unsupported")
        data = await read_json_body(request, settings.max_body_bytes)
        onboarding.validate(llm_id, data)  # bad input answers before any thread work
        report = await anyio.to_thread.run_sync(onboarding.post, llm_id, data)
        known.add(llm_id)
        return report

    @app.post("/v1/llms/{llm_id}/onboard")
    async def post_onboard(llm_id: str, request: Request) -> Response:
        if jobs is None:
            return unsupported()
        try:
            body = await request.json()
        except ValueError:
            return error_response(400, "malformed JSON body", "invalid_request")
        try:
            return JSONResponse(jobs.start(llm_id, body), status_code=202)
        except KeyError:
            return error_response(
                409, f"an onboarding of {llm_id!r} is running; GET it for its progress",
                "conflict",
            )  # fmt: skip

    @app.get("/v1/llms/{llm_id}/onboard")
    async def get_onboard(llm_id: str) -> Response:
        if jobs is None:
            return unsupported()
        status = jobs.status(llm_id)
        if status is None:
            return error_response(404, f"no onboarding of {llm_id!r} was started", "not_found")
        return JSONResponse(status)
