"""Shared fixtures: temporary workspaces, planted tables, the real data folder, a CLI runner."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "locus-data"


@pytest.fixture(autouse=True, scope="session")
def _model_cache() -> Iterator[None]:
    """Derived text encoders (ONNX export, model2vec distillation) are built once into the
    repository's ignored `.model-cache/`, not the user's ~/.cache: a clean clone builds them."""
    import os

    previous = os.environ.get("LOCUS_MODEL_CACHE")
    os.environ.setdefault("LOCUS_MODEL_CACHE", str(REPO_ROOT / ".model-cache"))
    yield
    if previous is None:
        os.environ.pop("LOCUS_MODEL_CACHE", None)


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> Iterator[None]:
    """Tests run torch on one thread: on a shared 2-core machine, two torch threads contending
    with other work can run 30x slower; one thread keeps the suite's time predictable."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def shared_data() -> Path:
    """The real evaluation data beside the repository; skip when this machine lacks it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not present (expected {SHARED_DATA.name}/ beside the repo)")
    return SHARED_DATA


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "ws"


def planted_long_table(
    n_llms: int = 6, n_queries: int = 40, seed: int = 0, missing: float = 0.1
) -> pd.DataFrame:
    """A canonical long table: LLM i is good at task (i % 2); some cells not evaluated."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_queries):
        task = "math" if q % 2 == 0 else "law"
        for i in range(n_llms):
            if rng.random() < missing:
                continue
            skilled = (i % 2 == 0) == (task == "math")
            p = 0.9 if skilled else 0.2
            rows.append(
                {
                    "llm_id": f"llm-{i}",
                    "query_id": f"q{q}",
                    "query_text": f"question {q} about {task} number {q * 7}",
                    "task": task,
                    "score": float(rng.random() < p),
                }
            )
    return pd.DataFrame(rows)


def locus_command(*args: object) -> list[str]:
    """`locus ARGS...` as a process of its own, run by this Python: its stdout and stderr are
    whatever the test makes them (pipes: not a terminal)."""
    return [sys.executable, "-c", "from locus.cli import main; main()", *map(str, args)]


def locus_env(**extra: str) -> dict[str, str]:
    """The environment for `locus_command`: this checkout's sources first, progress shown, one
    torch thread (two contend with the other work of a 2-core machine), and `extra`."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "LOCUS_NO_PROGRESS"}
    env.update(PYTHONPATH=str(REPO_ROOT / "src"), OMP_NUM_THREADS="1", **extra)
    return env


class LineReader:
    """The lines of a child process's stream, read by a thread, so that a test can wait for one
    with a deadline (a readiness condition) instead of a blocking read or a sleep."""

    def __init__(self, stream: IO[str]) -> None:
        import queue
        import threading

        self.seen: list[str] = []
        self.ended = False
        self._lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            for line in stream:
                self._lines.put(line.rstrip("\n"))
            self._lines.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def wait_for(self, wanted: Callable[[str], bool], timeout: float = 120) -> str:
        """The first line from now on that is `wanted`; fails the test at the stream's end or
        after `timeout` seconds, showing the lines seen."""
        import queue
        import time

        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no such line within {timeout} s; seen: {self.seen}")
            if line is None:
                self.ended = True
                pytest.fail(f"the stream ended without such a line; seen: {self.seen}")
            self.seen.append(line)
            if wanted(line):
                return line

    def rest(self, timeout: float = 120) -> list[str]:
        """Every line up to the stream's end (within `timeout` seconds)."""
        import queue

        lines: list[str] = []
        try:
            while not self.ended and (line := self._lines.get(timeout=timeout)) is not None:
                lines.append(line)
        except queue.Empty:
            pytest.fail(f"the stream did not end within {timeout} s; seen: {self.seen + lines}")
        self.ended = True
        self.seen += lines
        return lines


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> object:
        return json.loads(self.stdout)


@pytest.fixture
def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., CliResult]:
    """Run `locus ARGS...` in-process through the real entry point; returns code and output."""
    from locus.cli import main

    monkeypatch.setenv("LOCUS_NO_PROGRESS", "1")

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["locus", *map(str, args)])
        code = 0
        try:
            main()
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def postgres() -> Iterator[object]:
    """A throwaway PostgreSQL server on 127.0.0.1 for the session (`tests.postgres_server`);
    the tests that use it are skipped, with the reason, where it cannot start."""
    from tests.postgres_server import postgres_server

    with postgres_server() as server:
        if isinstance(server, str):
            pytest.skip(f"PostgreSQL tests skipped: {server}")
        yield server


@pytest.fixture
def postgres_url(postgres: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The URL of a new empty database; artifact copies go under the test's tmp_path."""
    from tests.postgres_server import PostgresServer

    assert isinstance(postgres, PostgresServer)
    monkeypatch.setenv("LOCUS_ARTIFACT_CACHE", str(tmp_path / "artifact-cache"))
    return postgres.create_database()


@pytest.fixture
def uvicorn_server() -> Iterator[Callable[[object], str]]:
    """Serve an app with a real uvicorn on 127.0.0.1 (a free port) in a thread."""
    import threading
    import time

    import uvicorn

    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(app: object) -> str:
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
        thread = threading.Thread(target=server.run)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.started, "uvicorn did not start within 10 s"
        port = server.servers[0].sockets[0].getsockname()[1]
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=10)
