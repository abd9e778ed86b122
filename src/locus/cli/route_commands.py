"""`locus route`: send queries to the LLM most likely to answer them correctly."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from locus.cli._app import ArtifactOption, JsonOption, WorkspaceOption, app, open_store
from locus.cli._render import print_json, stderr_console, stdout_console
from locus.errors import LocusInputError, LocusNotFoundError, did_you_mean

if TYPE_CHECKING:
    from locus.routing.decision import RouteRequest


@app.command("route")
def route_command(
    query: Annotated[str | None, typer.Argument(help="Query text to route.")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Route each line of this file.")
    ] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Candidates to show.")] = 3,
    quality: Annotated[
        float | None,
        typer.Option(
            "--quality",
            help="The cheapest LLM whose P(correct) is at least this share of the best LLM's "
            "on the query, in [0, 1] (e.g. 0.95; 0: the cheapest LLM).",
        ),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            "--budget",
            help="Mean USD per query to stay under: a cost weight tuned on the fit's "
            "validation queries (e.g. 0.001 = 1 USD per 1,000 queries).",
        ),
    ] = None,
    cost_weight: Annotated[
        float,
        typer.Option(
            "--cost-weight",
            help="Rank by P(correct) - W x expected USD per query (W = 10: one point of "
            "P(correct) is worth 0.1 cent per query).",
        ),
    ] = 0.0,
    max_cost: Annotated[
        float | None,
        typer.Option("--max-cost", help="No LLM expected to cost more USD on the query."),
    ] = None,
    unavailable: Annotated[
        list[str] | None, typer.Option("--unavailable", help="An LLM never to choose.")
    ] = None,
    no_guard: Annotated[
        bool,
        typer.Option(
            "--no-guard",
            help="Rank by P(correct) alone, without the fit's guard (which keeps a query on "
            "the best single LLM unless another is better by a margin chosen on validation).",
        ),
    ] = False,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            help="The queries' task, where you know it (one of the fit's tasks, e.g. 'law'): "
            "each LLM's measured rate on that task is read instead of the tasks of the "
            "query's nearest scored queries.",
        ),
    ] = None,
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send each query to the LLM most likely to answer it correctly."""
    from locus.routing.decision import RouteRequest  # not at start-up: it loads routing

    request = RouteRequest(
        top=top,
        cost_weight=cost_weight,
        quality=quality,
        budget=budget,
        max_cost=max_cost,
        unavailable=frozenset(unavailable or ()),
        guarded=not no_guard,
    )
    route_and_render(
        route_texts(query, file),
        request,
        workspace=workspace,
        artifact=artifact,
        as_json=as_json,
        task=task,
    )


def route_and_render(
    texts: list[str],
    request: RouteRequest | None = None,
    *,
    workspace: str | None,
    artifact: str = "default",
    as_json: bool = False,
    task: str | None = None,
) -> None:
    """Load the workspace router once, route every text (of `task`, where given), print the
    choices."""
    from locus.pipeline.workspace_router import WorkspaceRouter
    from locus.routing.decision import RouteRequest

    started = time.perf_counter()
    with open_store(workspace, create=False) as store:
        router = WorkspaceRouter(store, artifact)
        request = request or RouteRequest()
        strangers = sorted(request.unavailable - set(router.llm_ids))
        if strangers:
            raise LocusNotFoundError(
                f"unknown LLM {strangers[0]!r} for --unavailable"
                f"{did_you_mean(strangers[0], router.llm_ids)}; expected one of the pool's "
                f"{len(router.llm_ids)} LLMs (see `locus llms`)"
            )
        loaded = time.perf_counter()
        tasks = None if task is None else [task] * len(texts)
        decisions = router.route_texts(texts, request, tasks=tasks)
        routed = time.perf_counter()
    if len(texts) > 1:
        stderr_console().print(
            f"[dim]{len(texts):,} queries: loaded once in {loaded - started:.2f} s, routed in "
            f"{1000 * (routed - loaded) / len(texts):.2f} ms per query ({router.vectors.encoded:,} "
            f"encoded, {router.vectors.cache_hits:,} from the cache)[/]"
        )
    budget = request.budget
    above = [
        budget is not None and d.cost_usd is not None and d.cost_usd > budget for d in decisions
    ]
    if as_json:
        marks = [{} if budget is None else {"above_budget": a} for a in above]
        print_json(
            [
                {"query": text, **d.as_dict(), **mark}
                for text, d, mark in zip(texts, decisions, marks, strict=True)
            ]
        )
        return
    console = stdout_console()
    for text, decision, dear in zip(texts, decisions, above, strict=True):
        shown = text if len(text) <= 70 else text[:67] + "..."
        others = ", ".join(f"{c.llm_id} {c.p_correct:.2f}" for c in decision.runners_up)
        console.print(
            f"[bold]{decision.llm_id}[/] P(correct) {decision.p_correct:.2f}"
            + (f" ± {decision.uncertainty:.2f}" if decision.uncertainty is not None else "")
            + (f"  expected ${decision.cost_usd:.6f}" if decision.cost_usd is not None else "")
            + (f"  (then {others})" if others else "")
            + ("  [dim](held by the guard)[/]" if decision.held else "")
            + ("  [yellow]above the budget[/]" if dear else "")
            + f"\n  {shown!r}"
        )
    if any(above):
        assert budget is not None
        console.print(
            f"[yellow]{sum(above)} of {len(above)} routes expected to cost more than "
            f"--budget {budget:g}[/]: the budget is a mean over queries (a cost weight tuned "
            "on the fit's validation queries), so one query may cost more where others cost "
            "less; --max-cost caps each query"
        )


def route_texts(query: str | None, file: Path | None) -> list[str]:
    """The texts to route: the argument, or every non-empty line of the file."""
    if (query is None) == (file is None):
        raise LocusInputError(
            "route: expected a query text or --file, found "
            + ("both" if query is not None else "neither")
        )
    if query is not None:
        if not query.strip():
            raise LocusInputError("route: the query text is empty; expected some text to route")
        return [query]
    assert file is not None
    try:
        lines = [line for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as error:
        raise LocusInputError(
            f"{file}: cannot read ({error}); expected a UTF-8 text file"
        ) from error
    if not lines:
        raise LocusInputError(f"{file}: no non-empty lines; expected one query per line")
    return lines
