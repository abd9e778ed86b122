"""Canary probes (`locus.pipeline.canary`, `locus canary`): the same probes asked of each
endpoint at temperature 0 and compared with its own baseline, over real HTTP on loopback."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from locus.errors import LocusInputError
from locus.pipeline.canary import CHANGED_ALARM, compare, same_answer
from locus.store import Store
from tests.conftest import CliResult
from tests.planted_workspace import build_planted_workspace
from tests.server.fakes import fake_upstreams

LLMS = ("math-0", "law-0", "biology-0")


def test_an_answer_is_the_same_up_to_case_spaces_and_small_edits() -> None:
    assert same_answer("The answer is (C).", "  the answer is\n(C). ")
    assert same_answer("The answer is (C) because x > 2.", "The answer is (C), because x > 2.")
    assert not same_answer("The answer is (C).", "The answer is (A).  Since y < 1, we ...")
    assert not same_answer("", "(B)")


def test_compare_counts_changed_answers_and_names_whom_they_now_match() -> None:
    probes = [f"h{i}" for i in range(10)]
    baselines = {
        "a": {h: f"a says {h}" for h in probes},
        "b": {h: f"b answers {h} differently" for h in probes},
    }
    same = compare("a", dict(baselines["a"]), baselines)
    assert (same.probes, same.changed, same.alarm, same.answers_like) == (10, 0, False, None)
    # 4 of 10 answers changed: under the alarm's share (half)
    drift = {h: (f"a says {h}" if i >= 4 else f"new words {i}") for i, h in enumerate(probes)}
    partly = compare("a", drift, baselines)
    assert CHANGED_ALARM > 0.4 and partly.changed == 4 and not partly.alarm
    swapped = compare("a", dict(baselines["b"]), baselines)
    assert swapped.changed == 10 and swapped.alarm
    assert swapped.answers_like == "b" and swapped.like_share == 1.0
    assert "now answers like b (100% of probes)" in swapped.describe()
    with pytest.raises(LocusInputError, match="no baseline"):
        compare("c", {}, baselines)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _catalog(tmp_path: Path, port: int) -> Path:
    rows = ["llm_id,base_url,upstream_model"] + [
        f"{llm},http://127.0.0.1:{port}/{llm}/v1,model-{llm}" for llm in LLMS
    ]
    # an endpoint that is down: said so, and the others asked
    rows.append(f"law-1,http://127.0.0.1:{_closed_port()}/v1,model-law-1")
    path = tmp_path / "llms.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_locus_canary_raises_the_alarm_for_a_swapped_endpoint_and_names_the_new_one(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    """Three endpoints on loopback answer each probe their own way. Recorded, then checked:
    nothing changed. law-0's endpoint then answers as math-0's does: its check raises the
    alarm, 20 of 20 answers changed, "now answers like math-0"; the others stay quiet; the
    probes asked are the same 20 every time."""
    workspace = build_planted_workspace(tmp_path / "ws")
    refused = run_cli("canary", "check", "-w", workspace)
    assert refused.exit_code == 2 and "locus canary record" in refused.stderr
    with fake_upstreams({llm: [f"echo:{llm}"] for llm in LLMS}) as fake:
        imported = run_cli("import", "llms", _catalog(tmp_path, fake.port), "-w", workspace)
        assert imported.exit_code == 0, imported.stderr
        recorded = run_cli("canary", "record", "-w", workspace, "--json")
        assert recorded.exit_code == 0, recorded.stderr
        baseline = recorded.json()["baseline"]  # type: ignore[index]
        assert "unreachable" in baseline.pop("law-1")
        assert baseline == dict.fromkeys(sorted(LLMS), 20)
        checked = run_cli("canary", "check", "-w", workspace, "--json")
        assert checked.exit_code == 0, checked.stderr
        calm = checked.json()["checks"]  # type: ignore[index]
        assert [(c["llm_id"], c["changed"], c["alarm"]) for c in calm] == [
            (llm, 0, False) for llm in sorted(LLMS)
        ]
        fake.scripts["law-0"] = ["echo:math-0"]  # a new model behind law-0's name
        swapped = run_cli("canary", "check", "-w", workspace, "--fail-on-alarm")
        assert swapped.exit_code == 1
        assert "law-0: 20 of 20 canary answers changed (ALARM); now answers like math-0" in (
            swapped.stdout
        )
        assert "math-0: 0 of 20 canary answers changed\n" in swapped.stdout
        fake.scripts["biology-0"] = ["404"]  # its model retired: the others still checked
        partly = run_cli("canary", "check", "-w", workspace, "--json").json()
        by_llm = {c["llm_id"]: c for c in partly["checks"]}  # type: ignore[index]
        assert "has no model" in by_llm["biology-0"]["error"] and not by_llm["biology-0"]["alarm"]
        assert by_llm["law-0"]["alarm"] and by_llm["math-0"]["changed"] == 0
        asked: dict[str, list[Any]] = {
            llm: [b["messages"][-1]["content"] for b in fake.bodies[llm]] for llm in LLMS
        }
        rounds = [sorted(asked["math-0"][i * 20 : (i + 1) * 20]) for i in range(4)]
        assert rounds[0] == rounds[1] == rounds[2] == rounds[3] and len(set(rounds[0])) == 20
        assert all(b["temperature"] == 0 for b in fake.bodies["law-0"])
    with Store.open(workspace, create=False) as store:
        latest = store.canary_answers("latest")["law-0"]
        assert all(answer.startswith("math-0: ") for answer in latest.values())
        probes = json.loads(store.get_meta("canary_probes") or "[]")
        assert sorted(latest) == sorted(probes)


def test_the_watch_keeps_an_alarm_through_a_check_that_could_not_ask() -> None:
    """A raised alarm is not cleared by a round in which the endpoint could not be asked; it
    is cleared by a round whose answers are the LLM's own again. `on_alarm` hears each raise
    once."""
    from locus.pipeline.canary import CanaryCheck
    from locus.server.canary_watch import CanaryWatch

    rounds = iter(
        [
            [CanaryCheck("a", 20, 20, True, "b", 1.0)],
            [CanaryCheck("a", 0, 0, False, failed=20, error="endpoint unreachable")],
            [CanaryCheck("a", 20, 20, True, "b", 1.0)],
            [CanaryCheck("a", 20, 1, False)],
        ]
    )
    heard: list[str] = []
    watch = CanaryWatch(
        None,
        3600,
        on_alarm=heard.append,
        check=lambda store: next(rounds),  # type: ignore[arg-type]
    )
    watch.check_now()
    assert watch.state("a")["alarm"] and heard == ["a"]  # type: ignore[index]
    watch.check_now()
    state = watch.state("a")
    assert state is not None and state["alarm"] and state["error"] == "endpoint unreachable"
    watch.check_now()
    assert heard == ["a"]  # still the same alarm
    watch.check_now()
    assert watch.state("a")["alarm"] is False and watch.rounds == 4  # type: ignore[index]
