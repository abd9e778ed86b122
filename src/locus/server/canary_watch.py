"""The gateway's canary checks on a schedule (`ServerSettings.canary_every_s`).

Every `canary_every_s` seconds a background thread asks each LLM with a recorded baseline
(`locus canary record`) the workspace's canary probes again and compares the answers with it
(`locus.pipeline.canary.check_canaries`). An LLM whose answers changed raises its canary alarm:
a warning in the log, `locus_canary_alarm{llm_id}` = 1 in `/metrics`, `"canary": {...,
"alarm": true, "answers_like": ...}` in `GET /v1/upstreams`, and, with `on_drift = "discount"`
(the default), its evidence of the fit leaves its votes as on an outcome alarm, so that it is
routed as an unknown LLM of the pool until its outcomes say what it is now. An LLM whose answers
are its own again clears its alarm. A check that fails (an endpoint down) is logged and retried
at the next turn; the gateway's circuit breaker deals with the traffic.

Each worker process of `locus serve --workers N` runs its own checks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from locus.errors import LocusError
from locus.pipeline.canary import CanaryCheck, check_canaries
from locus.server.metrics import Metrics
from locus.store import Store

__all__ = ["CanaryWatch"]

logger = logging.getLogger("locus.server")


class CanaryWatch:
    """Canary checks every `every_s` seconds in a daemon thread (`start`, `stop`), their
    latest results per LLM (`state`), and `on_alarm(llm_id)` called once per raised alarm."""

    def __init__(
        self,
        store: Store,
        every_s: float,
        *,
        metrics: Metrics | None = None,
        on_alarm: Callable[[str], None] | None = None,
        check: Callable[[Store], list[CanaryCheck]] = check_canaries,
    ) -> None:
        self.store, self.every_s, self.metrics = store, every_s, metrics
        self.on_alarm, self._check = on_alarm, check
        self._latest: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="locus-canary", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def state(self, llm_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._latest.get(llm_id)
            return None if found is None else dict(found)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.check_now()

    def check_now(self) -> list[CanaryCheck]:
        """One round of checks; what it found (nothing where it failed: logged)."""
        try:
            checks = self._check(self.store)
        except (LocusError, OSError) as error:
            logger.warning("canary check failed: %s", error)
            return []
        for found in checks:
            with self._lock:
                before = self._latest.get(found.llm_id, {})
                if found.error is not None:  # not asked: its last answer stands, said why
                    self._latest[found.llm_id] = {
                        **(before or found.as_dict()), "error": found.error,
                        "failed_at": time.time(),
                    }  # fmt: skip
                    continue
                self._latest[found.llm_id] = {**found.as_dict(), "checked_at": time.time()}
            if self.metrics is not None:
                self.metrics.canary_alarm.labels(found.llm_id).set(1.0 if found.alarm else 0.0)
                self.metrics.canary_changed.labels(found.llm_id).set(found.changed_share)
            if found.alarm and not before.get("alarm"):
                logger.warning("canary alarm: %s", found.describe())
                if self.on_alarm is not None:
                    self.on_alarm(found.llm_id)
            elif before.get("alarm") and not found.alarm:
                logger.info("canary alarm cleared: %s", found.describe())
        self.rounds += 1
        return checks
