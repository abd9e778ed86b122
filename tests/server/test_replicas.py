"""Replicas: two `locus serve` processes (one of them with two workers) on one PostgreSQL store.

Each replica has its own artifact directory, so the trained artifact reaches it through the
database; scores posted to one replica are routed on by the other. Real processes, real HTTP on
127.0.0.1, every wait bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from locus.store import Store
from tests.planted_workspace import planted_rows, trained_planted_workspace
from tests.postgres_server import free_port

START_TIMEOUT_S = 90


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """start(url, cache_dir, *extra) -> base URL of a `locus serve` process, stopped after."""
    started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(url: str, cache: Path, *extra: str) -> str:
        port = free_port()
        env = {**os.environ, "LOCUS_ARTIFACT_CACHE": str(cache), "LOCUS_NO_PROGRESS": "1"}
        log = tmp_path / f"serve-{port}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-c", "from locus.cli import main; main()", "serve",
                 "--workspace", url, "--port", str(port), *extra],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        started.append((process, log))
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"locus serve exited {process.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    return base
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        pytest.fail(f"locus serve not ready in {START_TIMEOUT_S} s: {log.read_text()[-2000:]}")

    yield start
    for process, _ in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process, _ in started:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_scores_posted_to_one_replica_are_routed_on_by_the_other(
    postgres_url: str, tmp_path: Path, replicas: Callable[..., str]
) -> None:
    trained_planted_workspace(postgres_url)
    with Store.open(postgres_url, create=False) as store:
        _, secret = store.create_key("replicas")
        assert store.artifact_names() == ["default"]
    auth = {"authorization": f"Bearer {secret}"}
    first = replicas(postgres_url, tmp_path / "cache-a", "--workers", "2")
    second = replicas(postgres_url, tmp_path / "cache-b")
    # each replica fetched the artifact from the database into its own directory
    for cache in ("cache-a", "cache-b"):
        assert (tmp_path / cache / "artifacts" / "default" / "config.json").is_file()

    rows = planted_rows()
    mine = rows[rows["llm_id"] == "law-1"].sample(150, random_state=2)
    scores = [
        {"query_text": t, "score": s}
        for t, s in zip(mine["query_text"], mine["score"], strict=True)
    ]
    query = {"text": "court statute contract plaintiff", "top": 20}
    with httpx.Client(headers=auth, timeout=60) as client:
        before = client.post(f"{second}/v1/route", json=query).json()
        assert "newcomer" not in before["fallback_order"]
        posted = client.post(f"{first}/v1/llms/newcomer/scores", json={"scores": scores})
        assert posted.status_code == 200, posted.text
        assert posted.json()["embedding"]["new"] is True
        # the other replica (and every worker of the first) re-reads the pool within ~1 s
        seen = {}
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(seen) < 2:
            for name, base in (("first", first), ("second", second)):
                order = client.post(f"{base}/v1/route", json=query).json()["fallback_order"]
                if "newcomer" in order:
                    seen[name] = order
            time.sleep(0.3)
        assert set(seen) == {"first", "second"}, f"routed on by {sorted(seen)} only"
        # a law specialist by its scores: ranked among the law group, ahead of every other
        order = seen["second"]
        law = [i for i, llm in enumerate(order) if llm.startswith("law-") or llm == "newcomer"]
        assert order.index("newcomer") in law and max(law) == len(law) - 1, order
    with Store.open(postgres_url, create=False) as store:
        assert "newcomer" in store.embeddings("default")[0]
