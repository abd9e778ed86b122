"""The gateway's decision log in the store: written one transaction per request, read back
as written, outcomes set by request id, trimmed to the newest rows."""

from __future__ import annotations

from pathlib import Path

from locus.store import Store


def test_decisions_are_kept_read_back_and_trimmed_to_the_newest(tmp_path: Path) -> None:
    with Store.open(tmp_path / "ws") as store:
        for i in range(5):
            store.put_decision({
                "request_id": f"r{i}", "llm_id": "a" if i % 2 else "b", "propensity": 0.95,
                "p_correct": 0.7, "ranked": [["a", 0.7], ["b", 0.6]], "text_hash": f"h{i}",
                "explored": i == 3, "latency_ms": 12.5, "cost_usd": 0.001,
            })  # fmt: skip
        found = store.decisions()
        assert [d["request_id"] for d in found] == ["r0", "r1", "r2", "r3", "r4"]
        assert found[3]["explored"] is True and found[0]["ranked"] == [["a", 0.7], ["b", 0.6]]
        assert found[0]["outcome"] is None and found[0]["text"] is None
        assert store.set_decision_outcome("r1", 1.0) is True
        assert store.set_decision_outcome("nope", 1.0) is False
        assert store.decision("r1")["outcome"] == 1.0  # type: ignore[index]
        assert [d["request_id"] for d in store.decisions(limit=2)] == ["r3", "r4"]
        assert store.trim_decisions(keep=3) == 2 and store.decision_count() == 3
        assert [d["request_id"] for d in store.decisions()] == ["r2", "r3", "r4"]
        assert store.trim_decisions(keep=3) == 0
