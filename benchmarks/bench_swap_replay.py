"""A production replay on a dense pool: an endpoint swapped behind its name, and no change.

The stream: the test queries of the demo workspace (`make demo`: MMLU-Pro, 29 LLMs), in a
seeded order, each asked once. Each request is routed by the fitted router (guard included)
among the LLMs the pool scored on it (two LLMs answered fewer questions);
only the chosen LLM's outcome is revealed (its true score on that query), and fed back as
`locus serve` does: read by the drift test against the P(correct) predicted for it
(`locus.routing.drift`), then added to the router as one more scored query of that LLM
(`StackedRouter.add_outcomes`), its evidence of the fit dropped once its alarm is raised
(`on_drift = "discount"`).

The swap: from request `--swap-at` on, the LLM the router sent most of the first requests to
answers as the pool's weakest LLM does (its true scores on the same queries). No change: the
same stream without the swap, for false alarms.

Policies: the static router (the fit, no outcomes), outcomes read but no discount
(`on_drift = "alert"`), and the default (outcomes, and the discount on an alarm). Figures per
seed and mean ± sd over seeds: hit@1 over the stream (the swap's truth), the swapped LLM's
requests after the swap (all, and until its share of the next 50 requests falls under 10% for
good), the alarm's delay in its outcomes after the swap, and false alarms per 10,000 outcomes
on the no-change stream.

    python benchmarks/bench_swap_replay.py --workspace .locus --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, report

POLICIES = ("static", "outcomes", "outcomes+discount")
WINDOW = 50  # requests the swapped LLM's share is read over


def replay(
    workspace: Path, order: np.ndarray, policy: str, swap: tuple[str, str] | None, swap_at: int
) -> dict[str, Any]:
    """One stream under one policy; `swap` (the swapped LLM, the LLM it answers as)."""
    from locus.pipeline.data import workspace_table
    from locus.pipeline.workspace_router import WorkspaceRouter
    from locus.routing.decision import RouteRequest
    from locus.routing.drift import DriftMonitor
    from locus.store import Store

    with Store.open(workspace, create=False) as store:
        router = WorkspaceRouter(store, outcomes=False)
        data = workspace_table(store, split_seed=router.manifest.split_seed)
    ids = list(router.llm_ids)
    columns = [list(data.table.llm_ids).index(llm) for llm in ids]
    truth = data.table.scores[:, columns]
    fitted = router.router
    monitor = DriftMonitor()
    chosen, hits, alarm_at = [], [], None
    swapped_after = 0
    for t, row in enumerate(order):
        vector = data.vectors[row][None]
        # an LLM the pool never scored on this query cannot be replayed: it is unavailable
        missing = [ids[c] for c in np.flatnonzero(np.isnan(truth[row]))]
        [decision] = fitted.route(vector, RouteRequest(top=1, unavailable=tuple(missing)))
        llm = decision.llm_id
        column = ids.index(llm)
        answers_as = column
        if swap is not None and t >= swap_at and llm == swap[0]:
            answers_as = ids.index(swap[1])
            swapped_after += 1
        y = truth[row, answers_as]
        if np.isnan(y):
            y = 0.0  # the LLM it answers as was not scored here: counted wrong
        chosen.append(llm)
        hits.append(float(y))
        if policy == "static":
            continue
        p = float(decision.p_correct)
        raised = monitor.update(llm, min(max(p, 0.0), 1.0), float(y))
        if raised and swap is not None and llm == swap[0] and alarm_at is None:
            alarm_at = swapped_after
        fitted.add_outcomes(
            llm, vector, np.array([y], np.float32),
            forget_fit=policy == "outcomes+discount" and monitor.state(llm).alarm,
        )  # fmt: skip
    after = chosen[swap_at:]
    # its requests after the swap until its share of a window of the next 50 requests falls
    # under 10% (and stays so in every later window's start)
    settled = None
    if swap is not None:
        mine = np.array([llm == swap[0] for llm in after], float)
        shares = np.convolve(mine, np.ones(WINDOW), "valid") / WINDOW
        above = np.flatnonzero(shares >= 0.1)
        start = 0 if not len(above) else int(above[-1]) + 1
        settled = int(mine[:start].sum()) if start < len(shares) else None
    return {
        "swapped_requests_until_under_10pct": settled,
        "hit@1": float(np.mean(hits)),
        "hit@1_after_swap": float(np.mean(hits[swap_at:])),
        "swapped_requests_after": swapped_after,
        "swapped_share_last_half": (
            None if swap is None else after[len(after) // 2 :].count(swap[0]) / (len(after) // 2)
        ),
        "alarm_delay": alarm_at,
        "alarms": monitor.alarms(),
        "outcomes": len(order) if policy != "static" else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".locus")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--swap-at", type=int, default=200)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    from locus.pipeline.data import workspace_table
    from locus.pipeline.workspace_router import WorkspaceRouter
    from locus.routing.decision import RouteRequest
    from locus.store import Store

    with Store.open(args.workspace, create=False) as store:
        router = WorkspaceRouter(store, outcomes=False)
        data = workspace_table(store, split_seed=router.manifest.split_seed)
        test = data.rows("test")
        ids = list(router.llm_ids)
        first = router.router.route(data.vectors[test[: args.swap_at]], RouteRequest(top=1))
    picks = [d.llm_id for d in first]
    target = max(set(picks), key=picks.count)
    means = {llm: float(np.nanmean(data.table.scores[:, data.table.llm_index(llm)])) for llm in ids}
    weakest = min(means, key=means.__getitem__)
    print(
        f"swapped: {target} (routed {picks.count(target)} of the first {len(picks)}), answers "
        f"as {weakest} (mean {means[weakest]:.3f}) from request {args.swap_at}",
        flush=True,
    )
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        stream: {policy: [] for policy in POLICIES} for stream in ("swap", "no change")
    }
    started = time.perf_counter()
    for seed in args.seeds:
        order = test[np.random.default_rng(seed).permutation(len(test))]
        for stream, swap in (("swap", (target, weakest)), ("no change", None)):
            for policy in POLICIES:
                found = replay(args.workspace, order, policy, swap, args.swap_at)
                runs[stream][policy].append(found)
                print(f"seed {seed} {stream} {policy}: {found}", flush=True)

    def mean_sd(values: list[float]) -> dict[str, float]:
        return {
            "mean": statistics.mean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        }

    summary: dict[str, Any] = {}
    for stream, by_policy in runs.items():
        for policy, found in by_policy.items():
            row: dict[str, Any] = {
                "hit@1": mean_sd([f["hit@1"] for f in found]),
                "hit@1_after_swap": mean_sd([f["hit@1_after_swap"] for f in found]),
            }
            if stream == "swap":
                row["swapped_requests_after"] = mean_sd(
                    [f["swapped_requests_after"] for f in found]
                )
                row["swapped_share_last_half"] = mean_sd(
                    [f["swapped_share_last_half"] for f in found]
                )
                settled = [
                    f["swapped_requests_until_under_10pct"]
                    for f in found
                    if f["swapped_requests_until_under_10pct"] is not None
                ]
                row["swapped_requests_until_under_10pct"] = mean_sd(settled) if settled else None
                row["settled_in"] = len(settled)
                delays = [f["alarm_delay"] for f in found if f["alarm_delay"] is not None]
                row["alarm_delay"] = mean_sd(delays) if delays else None
                row["alarm_raised"] = len(delays)
            elif policy != "static":
                outcomes = sum(f["outcomes"] for f in found)
                alarms = sum(len(f["alarms"]) for f in found)
                row["false_alarms"] = alarms
                row["false_alarms_per_10000"] = 10_000 * alarms / outcomes
            summary[f"{stream} / {policy}"] = row
    report(
        f"swap-replay{args.tag}",
        {
            "swapped": target,
            "answers_as": weakest,
            "swap_at": args.swap_at,
            "requests": len(test),
            "seeds": args.seeds,
            "seconds": time.perf_counter() - started,
            "summary": summary,
            "per_seed": runs,
        },
    )


if __name__ == "__main__":
    main()
