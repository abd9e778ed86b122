"""Onboard an endpoint in one call: choose probe queries, ask the endpoint, grade the answers,
import the scores, embed the LLM, and say where it landed. No retraining.

1. Probes: `n` training queries that have a reference answer (`locus.pipeline.probes`; a
   re-run keeps the probes already answered and adds to them).
2. Asking (`locus.pipeline.endpoint`): each probe is the query text with an instruction for its
   grader (`INSTRUCTIONS`: end with "The answer is (X)" for a multiple-choice query, ...); each
   answer is graded (`locus.data.graders`) and kept in the store the moment it arrives
   (`Store.put_probe_answer`), so a crash or Ctrl-C loses no paid answer and a re-run asks only
   what is missing. An answer no grader can read is counted and shown, never scored as wrong.
   With fewer than `MIN_ANSWERED_PROBES` probes answered (or fewer than `n`, when `n` is
   smaller) nothing is imported or placed: the error says how many failed and that running
   the same call again asks only those. Above it, the LLM is placed from the probes answered,
   and the report says from how many of how many (`OnboardReport.headline`, `complete`).
3. The graded scores are imported as the LLM's own source `onboard:<llm_id>` (a re-run
   replaces it), the endpoint is recorded in the catalog (so `locus serve` can route to it),
   and the LLM is embedded by the fitted artifact (`embed_workspace_llms`).
4. The report: the nearest LLMs of the pool (embedding distance, each LLM embedded from its own
   scores on the same probes) with their measured agreement on the probes, the predicted
   accuracy per task beside the probes' measured one, the share of the workspace's test
   queries routing would now send to it (accuracy rule, unguarded), and what onboarding cost
   (tokens; USD where the catalog prices the LLM).

    >>> report = onboard_llm(store, "my-llm", Endpoint("http://127.0.0.1:8000/v1", "m"))
    ...                                                                  # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.data.graders import grade
from locus.data.llm_catalog import Endpoint
from locus.errors import LocusInputError
from locus.pipeline.data import workspace_table
from locus.pipeline.embed import embed_workspace_llms
from locus.pipeline.endpoint import EndpointAnswer, ask_all, check_endpoint
from locus.pipeline.fit import load_workspace_locus
from locus.pipeline.placement import placement
from locus.pipeline.probes import probe_order
from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT
from locus.pipeline.workspace_router import WorkspaceRouter
from locus.store import Store
from locus.store.references import ProbeAnswer

__all__ = ["INSTRUCTIONS", "MIN_ANSWERED_PROBES", "OnboardReport", "onboard_llm", "probe_messages"]

INSTRUCTIONS = {
    "choice": "Answer the multiple-choice question. Think step by step if you need to, then "
    "end with 'The answer is (X)', where X is the letter of the correct option.",
    "number": "Solve the problem. Think step by step if you need to, then end with "
    "'The answer is N', where N is the final number.",
    "exact": "Answer with the answer only: a word, a name, a number or a short phrase.",
}
MIN_GRADED = 4  # fewer graded probes than this place an LLM nowhere worth reporting
# fewer answered probes than this (or than n, when n is smaller) place nothing: the endpoint
# failed too often for its scores to stand for it; half the default n of 32
MIN_ANSWERED_PROBES = 16


def probe_messages(query_text: str, grader: str) -> list[dict[str, str]]:
    """The chat messages a probe is sent as: its grader's instruction, then the query."""
    return [
        {"role": "system", "content": INSTRUCTIONS[grader]},
        {"role": "user", "content": query_text},
    ]


@dataclass(frozen=True)
class OnboardReport:
    """What `onboard_llm` did and where the LLM landed (see the module)."""

    llm_id: str
    endpoint: str
    model: str
    strategy: str
    probes: int
    asked: int  # this run
    reused: int  # answered by an earlier run
    graded: int  # the scores the LLM is placed from
    ungradable: int
    failed: dict[str, str]  # query text (first 80 characters) -> why, after retries
    accuracy_on_probes: float | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: the catalog has no price for the LLM
    seconds: float
    nearest: list[dict[str, Any]] = field(default_factory=list)
    beside_default: dict[str, Any] | None = None  # `locus.pipeline.placement.beside_default`
    per_task: list[dict[str, Any]] = field(default_factory=list)
    routing_share: float | None = None
    routed_tasks: dict[str, float] = field(default_factory=dict)
    routed_examples: list[str] = field(default_factory=list)
    ungradable_examples: list[str] = field(default_factory=list)

    failed_probes: int = 0  # probes left without an answer after their retries

    @property
    def complete(self) -> bool:
        """Every probe was answered: none failed after its retries."""
        return self.failed_probes == 0

    def headline(self) -> str:
        """What the LLM was placed from, and what failed: the report's first line.

        >>> report = OnboardReport(
        ...     "x", "http://h/v1", "m", "random", probes=64, asked=64, reused=0, graded=12,
        ...     ungradable=0, failed={"q": "HTTP 503"}, accuracy_on_probes=0.5,
        ...     prompt_tokens=0, completion_tokens=0, cost_usd=None, seconds=1.0,
        ...     failed_probes=52,
        ... )
        >>> print(report.headline())  # doctest: +NORMALIZE_WHITESPACE
        placed x (m at http://h/v1) from 12 of 64 probes; 52 failed after retries (run the
        same command again to ask them)
        """
        line = (
            f"placed {self.llm_id} ({self.model} at {self.endpoint}) from {self.graded} of "
            f"{self.probes} probes"
        )
        if self.failed_probes:
            line += (
                f"; {self.failed_probes} failed after retries (run the same command again to "
                "ask them)"
            )
        return line

    def as_dict(self) -> dict[str, Any]:
        return {"summary": self.headline(), **asdict(self), "complete": self.complete}


def onboard_llm(
    store: Store,
    llm_id: str,
    endpoint: Endpoint,
    *,
    api_key: str | None = None,
    n: int = 32,
    strategy: str = "random",
    seed: int = 0,
    artifact: str = DEFAULT_ARTIFACT,
    concurrency: int = 4,
    timeout_s: float = 120.0,
    retries: int = 3,
    max_tokens: int | None = None,
    unreadable: str = "skip",
    progress: ProgressFactory = no_progress,
) -> OnboardReport:
    """Onboard the LLM behind `endpoint` as `llm_id` (see the module).

    `unreadable`: what an answer no grader can read counts as: "skip" (not scored, the
    default) or "wrong" (scored 0, as benchmark harnesses such as MMLU-Pro's do); either way
    the report counts them.

    Raises:
        LocusInputError: n below 1, an unknown strategy or `unreadable`, a workspace without
            reference answers or without a fitted artifact, an endpoint that cannot answer
            (unreachable, key refused, model not served), fewer than `MIN_ANSWERED_PROBES`
            probes answered (or than n, when smaller), fewer than `MIN_GRADED` gradable
            answers; nothing is then imported or embedded, and the answers received until then
            are kept for a re-run.
    """
    started = time.perf_counter()
    if n < 1:
        raise LocusInputError(f"onboard: n must be at least 1, found {n}")
    if unreadable not in ("skip", "wrong"):
        raise LocusInputError(f"onboard: unreadable must be skip or wrong, found {unreadable!r}")
    router = WorkspaceRouter(store, artifact)
    references = store.references()
    if not references:
        raise LocusInputError(
            "this workspace has no reference answers to grade a new LLM's answers against; "
            "import a source that carries them, e.g. `locus import mmlu-pro` (its answer keys), "
            "lm-eval or inspect logs, or a table with a reference column"
        )
    data = workspace_table(store, split_seed=router.manifest.split_seed)
    table = data.table
    train = data.rows("train")
    candidates = train[np.isin(np.asarray(table.text_hashes)[train], list(references))]
    if not len(candidates):
        raise LocusInputError(
            "no training query of this workspace has a reference answer; import the answers "
            "of the queries the pool was fitted on"
        )
    order = probe_order(
        table.scores, data.vectors, candidates, strategy, seed=seed, tasks=table.tasks
    )
    kept = store.probe_answers(llm_id)
    hashes = np.asarray(table.text_hashes)
    answered = [int(r) for r in order if hashes[r] in kept][:n]
    fresh = [int(r) for r in order if hashes[r] not in kept][: n - len(answered)]
    probes = answered + fresh
    prices = store.llm_metadata().get(llm_id, {})

    def keep(key: str, answer: EndpointAnswer) -> None:
        reference = references[key]
        store.put_probe_answer(
            ProbeAnswer(
                llm_id=llm_id, text_hash=key, answer=answer.text,
                score=grade(reference.grader, answer.text, reference.answer),
                upstream_model=answer.model, prompt_tokens=answer.prompt_tokens,
                completion_tokens=answer.completion_tokens, cost_usd=_cost(prices, answer),
                latency_ms=answer.latency_ms,
            )
        )  # fmt: skip

    failed: dict[str, str] = {}
    if fresh:
        check_endpoint(endpoint, api_key)
        prompts = [
            (
                hashes[r],
                probe_messages(str(table.query_texts[r]), references[hashes[r]].grader),
            )
            for r in fresh
        ]
        with progress(f"asking {endpoint.model} {len(fresh)} probes", total=len(fresh)) as step:
            failures = ask_all(
                endpoint, api_key, prompts, keep, concurrency=concurrency,
                timeout_s=timeout_s, retries=retries, max_tokens=max_tokens, advance=step,
            )  # fmt: skip
        text_of = {hashes[r]: " ".join(str(table.query_texts[r]).split())[:80] for r in fresh}
        failed = {text_of[key]: why for key, why in failures.items()}
    answers = store.probe_answers(llm_id)
    got = [(r, answers[hashes[r]]) for r in probes if hashes[r] in answers]
    if unreadable == "wrong":
        got = [(r, a if a.score is not None else replace(a, score=0.0)) for r, a in got]
        ungradable = [a for _, a in got if a.score == 0.0 and answers[a.text_hash].score is None]
    else:
        ungradable = [a for _, a in got if a.score is None]
    graded = [(r, a) for r, a in got if a.score is not None]
    unanswered = len(probes) - len(got)
    if len(got) < min(MIN_ANSWERED_PROBES, n):
        example = f", e.g. {next(iter(failed.values()))}" if failed else ""
        raise LocusInputError(
            f"onboard {llm_id}: placed nothing: only {len(got)} of {len(probes)} probes were "
            f"answered ({unanswered} failed after retries{example}); expected at least "
            f"{min(MIN_ANSWERED_PROBES, n)} answered to place an LLM; the {len(got)} answers "
            "received are kept: run the same command again (same --n, --strategy and --seed) "
            f"when the endpoint is healthy and it asks only the {unanswered} missing"
        )
    if len(graded) < min(MIN_GRADED, n):
        reasons = [f"{len(ungradable)} answers no grader could read"] if ungradable else []
        if failed:
            reasons.append(f"{len(failed)} probes failed ({next(iter(failed.values()))})")
        raise LocusInputError(
            f"onboard {llm_id}: only {len(graded)} of {len(probes)} probes were answered and "
            f"graded ({'; '.join(reasons) or 'none answered'}); nothing was imported; the "
            f"answers received are kept, so a re-run asks only the rest; expected at least "
            f"{min(MIN_GRADED, n)}"
        )
    _import_scores(store, llm_id, endpoint, table, graded)
    model = load_workspace_locus(store, artifact)  # embeds the new LLM, then the same probes
    embed_workspace_llms(store, [llm_id], name=artifact, model=model)
    router.refresh()
    tokens_in = sum(a.prompt_tokens or 0 for _, a in got)
    tokens_out = sum(a.completion_tokens or 0 for _, a in got)
    costs = [a.cost_usd for _, a in got if a.cost_usd is not None]
    report = OnboardReport(
        llm_id=llm_id,
        endpoint=endpoint.base_url,
        model=endpoint.model,
        strategy=strategy,
        probes=len(probes),
        asked=len(fresh),
        reused=len(answered),
        graded=len(graded),
        ungradable=len(ungradable),
        failed=failed,
        failed_probes=unanswered,
        accuracy_on_probes=float(np.mean([a.score for _, a in graded])),
        prompt_tokens=tokens_in,
        completion_tokens=tokens_out,
        cost_usd=float(sum(costs)) if len(costs) == len(got) else None,
        seconds=0.0,
        ungradable_examples=[" ".join(a.answer.split())[:120] for a in ungradable[:3]],
    )
    placed = placement(router, model, data, llm_id, graded)
    model.close()
    return replace(report, seconds=time.perf_counter() - started, **placed)


def _cost(prices: dict[str, Any], answer: EndpointAnswer) -> float | None:
    """USD of one answer from the catalog's prices (None when the LLM is not priced)."""
    if prices.get("cost_per_query") is not None:
        return float(prices["cost_per_query"])
    price_in, price_out = prices.get("price_in_per_mtok"), prices.get("price_out_per_mtok")
    if price_in is None or price_out is None:
        return None
    return (
        (answer.prompt_tokens or 0) * float(price_in)
        + (answer.completion_tokens or 0) * float(price_out)
    ) / 1e6


def _import_scores(
    store: Store,
    llm_id: str,
    endpoint: Endpoint,
    table: Any,
    graded: list[tuple[int, ProbeAnswer]],
) -> None:
    """The graded probes as the LLM's own source (replacing an earlier onboarding's), and its
    endpoint in the catalog."""
    import pandas as pd

    rows = pd.DataFrame(
        {
            "llm_id": llm_id,
            "query_id": [table.query_ids[r] for r, _ in graded],
            "query_text": [table.query_texts[r] for r, _ in graded],
            "task": [table.tasks[r] for r, _ in graded],
            "score": [a.score for _, a in graded],
            "cost_usd": [a.cost_usd for _, a in graded],
            "latency_ms": [a.latency_ms for _, a in graded],
        }
    )
    batch = ImportBatch.from_long(rows, source=f"onboard:{llm_id}", origin=endpoint.base_url)
    store.write_batch(batch, kind="onboard", replace=True, whole_source=True)
    store.upsert_llm_metadata([(llm_id, {"endpoint": endpoint.to_json()})])
