"""`--ray` against a real local Ray instance: a head started by the test (`ray start`, 2 CPUs,
loopback only), `locus encode --ray` and `locus benchmark --ray` as real processes connecting to
it, and the library calls behind them. Each gives what the single-machine path gives. Every
server of that head, and of the instance `ray_session("local")` starts, listens on 127.0.0.1
alone (read from /proc: each TCP socket its processes listen on)."""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.pipeline import workspace_table
from locus.ray_cluster import SINGLE_NODE
from locus.store import Store
from locus.text import HashingEncoder
from locus.text.cache import encode_missing
from tests.planted_workspace import ENCODER_DIM, build_planted_workspace, planted_rows
from tests.test_benchmark import FAST_LOCUS

# what ray_session sets for the instance it starts: every Ray server on loopback (without it,
# `ray start --node-ip-address=127.0.0.1` takes the machine's own address, and its GCS listens
# on every interface); and Ray's token authentication, on for `ray start`, which a client then
# has to ask for, with a token of this run's own (`ray start` no longer makes one where the
# machine has none in ~/.ray). Read by Ray when it is imported, so set first, for this process
# and those it starts.
LOOPBACK = {**SINGLE_NODE, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
os.environ.update(LOOPBACK)
ray = pytest.importorskip("ray")

# Ray's client leaves its own helper processes to the garbage collector on shutdown
pytestmark = [
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]
BIN = Path(sys.executable).parent
# the head is waited for while its process lives and does not listen yet: alone it listens in
# ~5 s, beside a full test run on 2 cores it took over 60 s
START_LIMIT_S = 180
COMMAND_LIMIT_S = 240


class _TooLong(Exception):
    pass


@pytest.fixture(autouse=True)
def _bounded() -> Iterator[None]:
    """Each test ends within COMMAND_LIMIT_S: a Ray client retries a bad cluster for ever."""

    def stop(signum: int, frame: object) -> None:
        raise _TooLong(f"over {COMMAND_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(COMMAND_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Head:
    port: int
    pid: int  # `ray start`, the leader of a session that holds every process of the head

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def ray_head() -> Iterator[Head]:
    """A Ray head on this machine, 2 CPUs, its servers on 127.0.0.1."""
    port = _free_port()
    # a short folder: Ray's socket paths must fit in 107 bytes
    scratch = tempfile.mkdtemp(prefix="lray", dir="/tmp")
    env = {**os.environ, **LOOPBACK, "RAY_USAGE_STATS_ENABLED": "0"}
    log = Path(scratch) / "ray-start.log"  # what `ray start` said, for a head that fails
    process = subprocess.Popen(
        [str(BIN / "ray"), "start", "--head", "--block", "--num-cpus=2", f"--port={port}",
         "--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats",
         f"--temp-dir={scratch}"],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + START_LIMIT_S
    while True:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        if process.poll() is not None or time.monotonic() > deadline:
            ended = process.poll()
            process.kill()
            said = log.read_text(errors="replace")[-3000:]
            what = f"exited {ended}" if ended is not None else f"not listening in {START_LIMIT_S} s"
            pytest.fail(f"the Ray head did not start ({what}); `ray start` said:\n{said}")
        time.sleep(0.2)
    try:
        yield Head(port, process.pid)
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the head and every Ray process it started
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="module")
def head(ray_head: Head) -> str:
    """The head's address."""
    return ray_head.address


@pytest.fixture()
def session(head: str) -> Iterator[object]:
    from locus.ray_cluster import ray_session

    with ray_session(head) as opened:
        yield opened


def _locus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "locus"), *args], capture_output=True, text=True, timeout=COMMAND_LIMIT_S
    )


def _vectors(path: Path) -> tuple[list[str], np.ndarray]:
    with Store.open(path) as store:
        data = workspace_table(store)
        return list(data.table.text_hashes), data.vectors


def test_encode_on_ray_gives_the_vectors_of_this_machine(head: str, tmp_path: Path) -> None:
    here = build_planted_workspace(tmp_path / "here")
    there = Path(build_planted_workspace(tmp_path / "there", encode=False))
    done = _locus(
        "encode", "-w", str(there), "--encoder", f"hashing-{ENCODER_DIM}", "--chunk-size", "100",
        "--json", "--ray", head,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["encoded"] == 480 and report["ray"]["cpus"] == 2
    assert report["ray"]["started_here"] is False
    hashes, vectors = _vectors(there)
    expected_hashes, expected = _vectors(here)
    assert hashes == expected_hashes
    np.testing.assert_array_equal(vectors, expected)
    # everything is cached now: a second run encodes nothing
    again = json.loads(
        _locus("encode", "-w", str(there), "--json", "--ray", head, "--ray-workers", "1").stdout
    )
    assert again["encoded"] == 0 and again["cached"] == 480


def test_ray_without_an_address_runs_on_this_machine(tmp_path: Path) -> None:
    # `--ray` alone (last, or before another option): Ray on this machine for the command
    here = build_planted_workspace(tmp_path / "here")
    there = Path(build_planted_workspace(tmp_path / "there", encode=False))
    done = _locus("encode", "-w", str(there), "--encoder", f"hashing-{ENCODER_DIM}", "--ray",
                  "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["encoded"] == 480 and report["ray"]["address"] == "local"
    assert report["ray"]["cpus"] >= 1
    np.testing.assert_array_equal(_vectors(there)[1], _vectors(here)[1])


def test_a_run_stopped_half_way_keeps_its_chunks_and_resumes(
    session: object, tmp_path: Path
) -> None:
    from locus.text.ray_encode import RayChunkEncoder

    path = Path(build_planted_workspace(tmp_path / "ws", encode=False))
    encoder = HashingEncoder(ENCODER_DIM)
    on_ray = RayChunkEncoder(encoder.name, encoder.name, session, workers=2)

    def stop_after_two(chunks):
        for i, vectors in enumerate(on_ray(chunks)):
            if i == 2:
                raise KeyboardInterrupt
            yield vectors

    with Store.open(path) as store, pytest.raises(KeyboardInterrupt):
        encode_missing(store, encoder, chunk_size=100, chunk_encoder=stop_after_two)
    with Store.open(path) as store:
        assert store.vector_count(encoder.name) == 200
        report = encode_missing(store, encoder, chunk_size=100, chunk_encoder=on_ray)
    assert (report.encoded, report.cached) == (280, 200)


def test_a_worker_with_another_encoder_fails_the_run(session: object) -> None:
    from locus.text.ray_encode import RayChunkEncoder

    wrong = RayChunkEncoder("hashing-16", "hashing-48", session)
    with pytest.raises(LocusInputError, match="on a Ray worker is 'hashing-16', not 'hashing-48'"):
        list(wrong([["a text"]]))


@pytest.mark.slow  # 25-65 s: `make slow` runs it
def test_benchmark_fits_on_ray_match_the_worker_processes(session: object, tmp_path: Path) -> None:
    from locus.benchmark import run_anchors

    path = build_planted_workspace(tmp_path / "ws")
    with Store.open(path) as store:
        data = workspace_table(store)
    methods = ["locus", "locus+knn", "cluster", "best-single"]

    def run(cache: Path, **how: object) -> dict:
        return run_anchors(
            data, seeds=[0, 1], evidence=[16], methods=methods, cache_dir=cache,
            locus_settings=FAST_LOCUS, **how,
        )  # fmt: skip

    on_ray = run(tmp_path / "ray", ray=session)
    processes = run(tmp_path / "processes", workers=2)
    for method in methods:
        for seed in (0, 1):
            one = processes["per_seed"][method]["16"][seed]
            two = on_ray["per_seed"][method]["16"][seed]
            for metric in ("hit@1", "guarded_hit@1", "auroc", "log_loss"):
                assert two[metric] == one[metric], (method, seed, metric)
    # the fits came back into the cache: a re-run reads them all
    again = run(tmp_path / "ray", ray=session)
    assert all(again["per_seed"][m]["16"][0]["cached"] for m in ("locus", "cluster"))


@pytest.mark.slow  # 25-65 s: `make slow` runs it
def test_cli_cost_suite_on_ray_gives_the_figures_of_one_machine(head: str, tmp_path: Path) -> None:
    rows = planted_rows(queries_per_task=80)
    price = {"math": 1e-2, "law": 1e-3, "biology": 1e-4}
    rows["cost_usd"] = [price[llm.split("-")[0]] for llm in rows["llm_id"]]
    build_planted_workspace(tmp_path / "one", rows)
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    common = ["benchmark", "cost", "--seed", "0", "--folds", "3", "--method", "cluster",
              "--method", "knn", "--pool", "p", "--json", "-q"]  # fmt: skip
    alone = _locus(*common, "-w", str(tmp_path / "one"), "--out", str(tmp_path / "o1"))
    shared = _locus(*common, "-w", str(tmp_path / "two"), "--out", str(tmp_path / "o2"),
                    "--ray", head)  # fmt: skip
    assert alone.returncode == 0, alone.stderr
    assert shared.returncode == 0, shared.stderr
    one, two = json.loads(alone.stdout), json.loads(shared.stdout)
    for method in ("cluster", "knn"):
        for metric in ("aiq", "auroc", "max_accuracy"):
            assert two["summary"][method][metric] == one["summary"][method][metric], metric
    # the Ray run fitted every fold's cluster router into the workspace's cache
    cached = list((tmp_path / "two" / "benchmark-cache" / "anchors" / "cluster").iterdir())
    assert len(cached) == 3


def test_bad_addresses_and_suites_are_clear_errors(tmp_path: Path) -> None:
    path = build_planted_workspace(tmp_path / "ws")
    bad = _locus("encode", "-w", str(path), "--ray", "127.0.0.1:1", "--json")
    assert bad.returncode == 2
    assert "cannot connect to Ray at '127.0.0.1:1'" in json.loads(bad.stdout)["error"]
    onboarding = _locus("benchmark", "onboarding", "-w", str(path), "--ray")
    assert onboarding.returncode == 2 and "onboarding fits in sequence" in onboarding.stderr
    workers = _locus("encode", "-w", str(path), "--ray-workers", "2")
    assert workers.returncode == 2 and "--ray-workers is for --ray" in workers.stderr


def _processes(root: int) -> set[int]:
    """`root`, its descendants, and the processes of the session it leads."""
    children: dict[int, list[int]] = {}
    todo = [root]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        _state, parent, _group, session = stat.rsplit(")", 1)[1].split()[:4]  # after "(name)"
        children.setdefault(int(parent), []).append(int(entry.name))
        if int(session) == root:
            todo.append(int(entry.name))
    found: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def _host(word_hex: str) -> str:
    """An address of /proc/net/tcp{,6}: 32-bit words in hex, each in this machine's order."""
    words = [word_hex[i : i + 8] for i in range(0, len(word_hex), 8)]
    raw = b"".join(int(word, 16).to_bytes(4, sys.byteorder) for word in words)
    return str(ipaddress.ip_address(raw))


def _listening(pids: Iterable[int]) -> list[tuple[str, int, int]]:
    """(host, port, pid) of every TCP socket the processes listen on."""
    owner: dict[str, int] = {}  # socket inode -> pid
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                owner[target[len("socket:[") : -1]] = pid
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in owner:  # state 0A: LISTEN
                host, port = fields[1].split(":")
                found.append((_host(host), int(port, 16), owner[fields[9]]))
    return found


def _is_loopback(host: str) -> bool:
    address = ipaddress.ip_address(host)
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1, a dual-stack socket
    return (mapped or address).is_loopback


class _Alive:
    """An actor: a worker process that stays up while the test reads its sockets."""

    def pid(self) -> int:
        return os.getpid()


def _servers(root: int, expected: set[int]) -> list[tuple[str, int, int]]:
    """The listening sockets of `root`'s processes once `expected` ports are among them (Ray's
    servers start one after another)."""
    deadline = time.monotonic() + START_LIMIT_S
    while True:
        sockets = _listening(_processes(root))
        if expected <= {port for _, port, _ in sockets} or time.monotonic() > deadline:
            return sockets
        time.sleep(0.2)


def _node_ports(node: dict) -> set[int]:
    """The ports a node's record names: its raylet's, object manager's, agents'."""
    names = ("NodeManagerPort", "ObjectManagerPort", "RuntimeEnvAgentPort", "MetricsExportPort",
             "DashboardAgentListenPort")  # fmt: skip
    return {int(node[name]) for name in names if int(node.get(name) or -1) > 0}


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")
def test_every_server_of_the_head_listens_on_loopback_only(ray_head: Head, session: object) -> None:
    worker = ray.remote(num_cpus=0)(_Alive).remote()
    worker_pid = ray.get(worker.pid.remote())
    try:
        (node,) = [n for n in ray.nodes() if n["Alive"]]
        assert node["NodeManagerAddress"] == "127.0.0.1"
        expected = {ray_head.port, *_node_ports(node)}
        sockets = _servers(ray_head.pid, expected)
    finally:
        ray.kill(worker)
    # the GCS, the raylet and object manager, the agents and a worker are all there
    assert expected <= {port for _, port, _ in sockets}, (expected, sockets)
    assert worker_pid in {pid for _, _, pid in sockets}
    beyond = [s for s in sockets if not _is_loopback(s[0])]
    assert not beyond, f"Ray servers listening beyond loopback (host, port, pid): {beyond}"


_LOCAL_SESSION = """
import json, os, sys
from locus.ray_cluster import ray_session

class Alive:
    def pid(self):
        return os.getpid()

with ray_session("local", cpus=1):
    import ray
    worker = ray.remote(num_cpus=0)(Alive).remote()
    pid = ray.get(worker.pid.remote())
    (node,) = [n for n in ray.nodes() if n["Alive"]]
    print(json.dumps({"worker": pid, "node": node}, default=str), flush=True)
    sys.stdin.readline()  # the test reads the sockets, then closes this
"""


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")
def test_the_local_instance_listens_on_loopback_only(tmp_path: Path) -> None:
    # ray_session turns cluster mode off itself: the environment does not
    env = {k: v for k, v in os.environ.items() if k not in SINGLE_NODE}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    with open(tmp_path / "stderr", "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", _LOCAL_SESSION], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        assert process.stdout is not None and process.stdin is not None
        line = process.stdout.readline()
        assert line, (tmp_path / "stderr").read_text()[-3000:]
        started = json.loads(line)
        node = started["node"]
        assert node["NodeManagerAddress"] == "127.0.0.1"
        sockets = _servers(process.pid, _node_ports(node))
        assert _node_ports(node) <= {port for _, port, _ in sockets}, (node, sockets)
        assert started["worker"] in {pid for _, _, pid in sockets}
        beyond = [s for s in sockets if not _is_loopback(s[0])]
        assert not beyond, f"Ray servers listening beyond loopback (host, port, pid): {beyond}"
        process.stdin.close()
        assert process.wait(timeout=COMMAND_LIMIT_S) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def test_a_local_instance_refuses_ray_imported_in_cluster_mode() -> None:
    # Ray imported before ray_session could turn cluster mode off: refused before it starts
    env = {k: v for k, v in os.environ.items() if k not in SINGLE_NODE}
    script = (
        "import ray\n"
        "from locus.ray_cluster import ray_session\n"
        "from locus.errors import LocusInputError\n"
        "try:\n"
        "    with ray_session('local', cpus=1):\n"
        "        print('started')\n"
        "except LocusInputError as error:\n"
        "    print(error)\n"
        "print(ray.is_initialized())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env,
        timeout=COMMAND_LIMIT_S,
    )  # fmt: skip
    said, initialized = done.stdout.strip().splitlines()[-2:]
    assert "not on loopback only" in said and "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0" in said
    assert initialized == "False"
