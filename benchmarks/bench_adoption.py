"""Adoption: a stream of requests, a newcomer onboarded from k probes, outcomes fed back as they
arrive. Does the router come to use a better LLM it has just met, and how fast?

Leave-one-LLM-out on a real pool (the router fitted without the newcomer, as bench_newcomer.py
does), then a stream of held-out queries (validation and test queries every LLM was scored
on, shuffled per seed) routed in batches of `--batch` requests through `StackedRouter.route`
(guard included), each request's fallback order reordered by `Exploration.reorder` exactly as
the gateway does. The newcomer joins from `--k` training probes (random, or the first k of
the probe strategy `--probes`; embedding + votes, as `locus onboard` does). With feedback,
every answer the newcomer gives is scored (the real score of that LLM on that query) and,
after each batch, its embedding is recomputed from its probes and outcomes and its votes
re-read (`StackedRouter.join`): what `POST /v1/outcomes` does with `outcome_refresh_s = 0`.
Outcomes of the fitted LLMs change nothing (their votes are fitted), so they are not fed.

Per variant (static: no feedback, no exploration; feedback; feedback + exploration share),
over the stream: hit@1, the newcomer's share (overall and per window of 200), and the first
request at which its share over the last 200 reaches 80% of its oracle share: the share the
same router gives it with full evidence (embedded from 1,024 of its training scores, its
votes from all of them). Beside them: the router without the newcomer, the newcomer alone,
the hindsight best single LLM on the stream, the full-evidence router.

    python benchmarks/bench_adoption.py --dataset mmlu-pro --llm best --k 32 --explore 0.1 1

The workspace is bench_accuracy.py's (`.bench/accuracy/<dataset>`, imported and encoded there);
the leave-one-out artifact is bench_newcomer.py's (fitted here when missing).
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

from _common import REPO_ROOT, write_results
from bench_newcomer import Reading, _router, draw_probes, loo_artifact, read_beside, thin_reading

from locus.locus import Locus
from locus.pipeline import workspace_table
from locus.routing import StackedRouter
from locus.routing.explore import Exploration
from locus.store import Store

WINDOW = 200  # requests over which the newcomer's running share is read
FULL_EVIDENCE = 1024  # scores the oracle-share router embeds the newcomer from


class Onboarded:
    """The LOO router with the newcomer onboarded from its evidence, re-read on demand."""

    def __init__(
        self,
        folder: Path,
        model: Locus,
        newcomer: str,
        default: str | None,
        thin: Reading | None = None,
    ) -> None:
        self.router: StackedRouter = _router(folder)
        self.router = read_beside(self.router, thin)
        self.model, self.newcomer, self.default = model, newcomer, default

    def onboard(
        self,
        vectors: np.ndarray,
        scores: np.ndarray,
        tasks: list[str | None],
        default_scores: np.ndarray | None,
        embed_from: np.ndarray | None = None,
    ) -> None:
        """Embed the newcomer from its evidence (or the `embed_from` rows of it) and join its
        votes from all of it."""
        rows = np.arange(len(scores)) if embed_from is None else embed_from
        vector = self.model.embed(vectors[rows], scores[rows])
        self.router.locus.pool.upsert(  # type: ignore[attr-defined]
            self.newcomer, vector, len(rows), float(np.mean(scores[rows]))
        )
        self.router.join(self.newcomer, vectors, scores, tasks, default_scores=default_scores)


def _stream(
    onboarded: Onboarded,
    ids: list[str],
    vectors: np.ndarray,
    truth: np.ndarray,
    tasks: list[str | None],
    default_truth: np.ndarray | None,
    evidence: tuple[np.ndarray, np.ndarray, list[str | None], np.ndarray | None],
    *,
    feedback: bool,
    exploration: Exploration,
    batch: int,
    seed: int,
) -> dict[str, Any]:
    """Route the stream; the chosen LLM per request, and the newcomer's evidence growing."""
    rng = np.random.default_rng([seed, 7])
    probe_vectors, probe_scores, probe_tasks, probe_default = evidence
    own_vectors, own_scores = list(probe_vectors), list(probe_scores)
    own_tasks, own_default = list(probe_tasks), list(() if probe_default is None else probe_default)
    x = ids.index(onboarded.newcomer)
    chosen = np.empty(len(truth), np.int64)
    explored = np.zeros(len(truth), bool)
    for start in range(0, len(truth), batch):
        block = slice(start, min(start + batch, len(truth)))
        decisions = onboarded.router.route(vectors[block], top=len(ids))
        for offset, decision in enumerate(decisions):
            order, was_explored = exploration.reorder(decision.ranked, rng)
            i = start + offset
            chosen[i], explored[i] = ids.index(order[0].llm_id), was_explored
        if not feedback:
            continue
        mine = [i for i in range(block.start, block.stop) if chosen[i] == x]
        if not mine:
            continue
        own_vectors += list(vectors[mine])
        own_scores += list(truth[mine, x])
        own_tasks += [tasks[i] for i in mine]
        if default_truth is not None:
            own_default += list(default_truth[mine])
        onboarded.onboard(
            np.asarray(own_vectors, np.float32),
            np.asarray(own_scores, np.float32),
            own_tasks,
            None if default_truth is None else np.asarray(own_default, np.float32),
        )
    hits = truth[np.arange(len(truth)), chosen]
    to_newcomer = (chosen == x).astype(np.float64)
    return {
        "hit@1": float(hits.mean()),
        "share": float(to_newcomer.mean()),
        "explored": float(explored.mean()),
        "window_shares": [
            float(to_newcomer[s : s + WINDOW].mean()) for s in range(0, len(truth), WINDOW)
        ],
        "running_share": _running(to_newcomer),
        "outcomes": len(own_scores) - len(probe_scores),
    }


def _running(values: np.ndarray) -> list[float]:
    """The mean over the last `WINDOW` values at every request (fewer at the start)."""
    sums = np.cumsum(np.concatenate([[0.0], values]))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - WINDOW, 0)
    return ((sums[ends] - sums[starts]) / (ends - starts)).tolist()


def _reached(running: list[float], target: float) -> int | None:
    """The first request (1-based) from a full window on whose running share is >= target."""
    for i in range(WINDOW - 1, len(running)):
        if running[i] >= target:
            return i + 1
    return None


def run(
    store: Store,
    newcomer: str,
    k: int,
    seeds: list[int],
    shares: list[float],
    requests: int,
    batch: int,
    with_thin: bool = False,
    probes_by: str | None = None,
) -> list[dict[str, Any]]:
    folder = loo_artifact(store, newcomer)
    data = workspace_table(store, split_seed=0)
    table = data.table
    base = _router(folder)
    pool_ids = list(base.llm_ids)
    ids = [*pool_ids, newcomer]
    columns = [table.llm_index(llm) for llm in ids]
    held_out = np.concatenate([data.rows("val"), data.rows("test")])
    held_out = held_out[~np.isnan(table.scores[held_out][:, columns]).any(axis=1)]
    train = data.rows("train")
    x = table.llm_index(newcomer)
    scored = train[~np.isnan(table.scores[train, x])]
    default = base.guard.default if base.guard is not None else None
    model = Locus.load(folder, workspace=None)
    thin = thin_reading(_router(folder), data, model) if with_thin else None
    rows = []
    for seed in seeds:
        stream = np.random.default_rng([seed, 1]).permutation(held_out)[:requests]
        vectors, truth = data.vectors[stream], table.scores[stream][:, columns]
        tasks = [table.tasks[i] for i in stream]
        default_truth = None if default is None else truth[:, ids.index(default)]
        probes = draw_probes(data, pool_ids, newcomer, k, seed, probes_by)

        def evidence(
            rows_: np.ndarray,
        ) -> tuple[np.ndarray, np.ndarray, list[str | None], np.ndarray | None]:
            held = None if default is None else table.scores[rows_, table.llm_index(default)]
            tasks_ = [table.tasks[i] for i in rows_]
            return data.vectors[rows_], table.scores[rows_, x], tasks_, held

        without = base.route(vectors, top=len(pool_ids))
        row: dict[str, Any] = {
            "newcomer": newcomer, "k": k, "seed": seed, "requests": len(stream),
            "without": float(np.mean([
                truth[i, pool_ids.index(d.llm_id)] for i, d in enumerate(without)
            ])),
            "alone": float(truth[:, -1].mean()),
            "hindsight_best_single": float(truth.mean(axis=0).max()),
            "hindsight_best_llm": ids[int(truth.mean(axis=0).argmax())],
            "oracle": float(truth.max(axis=1).mean()),
        }  # fmt: skip
        full = Onboarded(folder, model, newcomer, default, thin)
        embed_from = np.sort(
            np.random.default_rng([seed, 3]).choice(
                len(scored), min(FULL_EVIDENCE, len(scored)), replace=False
            )
        )
        full.onboard(*evidence(scored), embed_from=embed_from)
        oracle_run = _stream(
            full, ids, vectors, truth, tasks, default_truth, evidence(scored),
            feedback=False, exploration=Exploration(), batch=batch, seed=seed,
        )  # fmt: skip
        row["full_evidence"] = {"hit@1": oracle_run["hit@1"], "share": oracle_run["share"]}
        target = 0.8 * oracle_run["share"]
        variants = [("static", False, 0.0), ("feedback", True, 0.0)]
        variants += [(f"feedback+explore={s:g}", True, s) for s in shares]
        variants += [(f"explore={s:g} (no feedback)", False, s) for s in shares[:1]]
        row["variants"] = {}
        for label, feedback, share in variants:
            began = time.perf_counter()
            onboarded = Onboarded(folder, model, newcomer, default, thin)
            onboarded.onboard(*evidence(probes))
            result = _stream(
                onboarded, ids, vectors, truth, tasks, default_truth, evidence(probes),
                feedback=feedback, exploration=Exploration(share), batch=batch, seed=seed,
            )  # fmt: skip
            result["reached_80pct_of_oracle_share_at"] = _reached(result["running_share"], target)
            result["seconds"] = time.perf_counter() - began
            del result["running_share"]
            row["variants"][label] = result
            print(
                f"{newcomer} k={k} seed={seed} {label}: hit@1 {result['hit@1']:.4f}, share "
                f"{result['share']:.1%} (windows "
                + " ".join(f"{w:.0%}" for w in result["window_shares"])
                + f"), explored {result['explored']:.1%}, outcomes {result['outcomes']}, 80% of "
                f"oracle share {target / 0.8:.1%} at {result['reached_80pct_of_oracle_share_at']}"
                f" ({result['seconds']:.0f} s)",
                flush=True,
            )
        print(
            f"  without {row['without']:.4f}, alone {row['alone']:.4f}, hindsight best "
            f"{row['hindsight_best_llm']} {row['hindsight_best_single']:.4f}, full evidence "
            f"{oracle_run['hit@1']:.4f} ({oracle_run['share']:.1%}), oracle {row['oracle']:.4f}",
            flush=True,
        )
        rows.append(row)
    model.close()
    return rows


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean_sd(values: list[float]) -> dict[str, float]:
        return {
            "mean": statistics.fmean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        }

    out: dict[str, Any] = {
        key: mean_sd([r[key] for r in rows])
        for key in ("without", "alone", "hindsight_best_single", "oracle")
    }
    out["full_evidence"] = {
        "hit@1": mean_sd([r["full_evidence"]["hit@1"] for r in rows]),
        "share": mean_sd([r["full_evidence"]["share"] for r in rows]),
    }
    for label in rows[0]["variants"]:
        found = [r["variants"][label] for r in rows]
        reached = [f["reached_80pct_of_oracle_share_at"] for f in found]
        out[label] = {
            "hit@1": mean_sd([f["hit@1"] for f in found]),
            "share": mean_sd([f["share"] for f in found]),
            "last_window_share": mean_sd([f["window_shares"][-1] for f in found]),
            "reached_80pct_at": reached,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="mmlu-pro")
    parser.add_argument("--llm", default="best", help="an LLM id, or best / worst")
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--explore", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--workspace", type=Path, default=REPO_ROOT / ".bench" / "accuracy")
    parser.add_argument(
        "--thin", action="store_true",
        help="the newcomer read beside the pool (locus.routing.thin), fitted on the "
        "leave-one-out router where it was fitted before locus fit kept one",
    )  # fmt: skip
    parser.add_argument("--probes", default=None, help="a probe strategy; default: uniform")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    store = Store.open(args.workspace / args.dataset)
    data = workspace_table(store, split_seed=0)
    means = np.nanmean(data.table.scores[data.rows("train")], axis=0)
    named = {
        "best": data.table.llm_ids[int(means.argmax())],
        "worst": data.table.llm_ids[int(means.argmin())],
    }
    llm = named.get(args.llm, args.llm)
    rows = run(
        store,
        llm,
        args.k,
        args.seeds,
        args.explore,
        args.requests,
        args.batch,
        args.thin,
        args.probes,
    )
    summary = _summary(rows)
    for key, value in summary.items():
        print(key, value)
    written = write_results(
        f"adoption-{args.dataset}{args.tag}", {"rows": rows, "summary": summary}
    )
    print(f"written {written}")
    store.close()


if __name__ == "__main__":
    main()
