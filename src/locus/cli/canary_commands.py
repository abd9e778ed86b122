"""`locus canary record | check`: has an LLM's endpoint changed behind its name? The same probes
asked at temperature 0, compared with its own earlier answers (`locus.pipeline.canary`)."""

from __future__ import annotations

from typing import Annotated

import typer

from locus.cli._app import JsonOption, WorkspaceOption, app, open_store
from locus.cli._render import print_json, stdout_console

canary_app = typer.Typer(
    help="Canary probes: the same questions asked of each endpoint at temperature 0, compared "
    "with its own earlier answers (no reference answers needed).",
    no_args_is_help=True,
)
app.add_typer(canary_app, name="canary")

LlmsArgument = Annotated[
    list[str] | None,
    typer.Argument(help="LLMs of the catalog (default: every LLM with an endpoint)."),
]


@canary_app.command("record")
def record_command(
    llms: LlmsArgument = None,
    probes: Annotated[
        int, typer.Option("--probes", min=1, help="Probes, drawn once for the workspace [20].")
    ] = 20,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Ask each LLM the canary probes; keep its answers as its baseline.

    Later checks are compared with it; recording again makes a new baseline."""
    from locus.pipeline.canary import record_canaries

    with open_store(workspace, create=False) as store:
        kept = record_canaries(store, llms, probes=probes)
    if as_json:
        print_json({"baseline": kept})
        return
    for llm, answers in kept.items():
        if isinstance(answers, str):
            stdout_console().print(f"{llm}: not recorded ({answers})")
        else:
            stdout_console().print(f"{llm}: {answers} canary answers kept as its baseline")


@canary_app.command("check")
def check_command(
    llms: LlmsArgument = None,
    fail_on_alarm: Annotated[
        bool,
        typer.Option("--fail-on-alarm", help="Exit with status 1 when an alarm is raised (cron)."),
    ] = False,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Ask the canary probes again; say how many answers changed and whom they now match.

    The alarm is raised where half or more of an LLM's answers changed; the LLM whose
    baseline the new answers match best, where it beats the LLM's own, is named ("now answers
    like ...")."""
    from locus.pipeline.canary import check_canaries

    with open_store(workspace, create=False) as store:
        checks = check_canaries(store, llms)
    if as_json:
        print_json({"checks": [check.as_dict() for check in checks]})
    else:
        for check in checks:
            stdout_console().print(check.describe())
    if fail_on_alarm and any(check.alarm for check in checks):
        raise typer.Exit(1)


__all__ = ["canary_app"]
