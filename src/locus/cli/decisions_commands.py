"""`locus decisions`: the gateway's decision log, summed up or exported."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from locus.cli._app import JsonOption, WorkspaceOption, app, open_store
from locus.cli._render import print_json, stdout_console
from locus.errors import LocusInputError

EXPORTS = (".csv", ".jsonl")


@app.command("decisions")
def decisions_command(
    export: Annotated[
        Path | None,
        typer.Option(
            "--export",
            help="Write every decision to this .csv or .jsonl file (request id, time, LLM, "
            "the probability routing chose it, P(correct), the first candidates, text hash "
            "or text, latency, tokens, cost, outcome).",
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """The decisions `locus serve` logged (decision_log: hash, the default, or text): per LLM
    its requests, the probability routing chose it, the outcomes posted and their rate, and
    what each LLM's rate would have been had it answered every request (an off-policy
    estimate, valid where exploration gave it a chance: `locus serve --explore`)."""
    from locus.pipeline.outcomes import decision_report

    if export is not None and export.suffix not in EXPORTS:
        raise LocusInputError(f"--export {export}: expected a {' or '.join(EXPORTS)} file name")
    with open_store(workspace, create=False) as store:
        report = decision_report(store)
        if export is not None:
            written = _export(store.decisions(), export)
    if as_json:
        print_json(report if export is None else {**report, "exported": str(export)})
        return
    console = stdout_console()
    if not report["decisions"]:
        console.print(
            "no decisions logged yet: `locus serve` logs each chat request it answers "
            "(decision_log = hash, the default; text keeps the prompts too)"
        )
    else:
        _render(report)
    if export is not None:
        console.print(f"wrote {written:,} decisions to {export}")


def _export(rows: list[dict[str, Any]], path: Path) -> int:
    """Write `rows` to `path` (.csv: `ranked` as JSON text; .jsonl: one object a line),
    through a temporary file so that a failed write leaves no half file."""
    from locus.store.decisions import DECISION_FIELDS

    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8", newline="") as out:
        if path.suffix == ".jsonl":
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            writer = csv.DictWriter(out, fieldnames=list(DECISION_FIELDS))
            writer.writeheader()
            for row in rows:
                writer.writerow({**row, "ranked": json.dumps(row["ranked"])})
    temporary.replace(path)
    return len(rows)


def _render(report: dict[str, Any]) -> None:
    from rich.table import Table

    console = stdout_console()
    table = Table(
        title=f"{report['decisions']:,} decisions, {report['first']} to {report['last']} "
        f"({report['explored']:.1%} explored); {report['outcomes']:,} outcomes posted",
        title_justify="left",
    )
    columns = ("LLM", "requests", "share", "P(chosen)", "outcomes", "rate", "if every request")
    for column in columns:
        table.add_column(column, justify="left" if column == "LLM" else "right")
    for llm, entry in report["llms"].items():
        estimate = entry.get("if_every_request")
        shown = "-"
        if estimate is not None and estimate["low"] is not None:
            shown = f"{estimate['value']:.3f} [{estimate['low']:.3f}, {estimate['high']:.3f}]"
        table.add_row(
            llm, f"{entry['requests']:,}", f"{entry['share']:.1%}",
            "-" if entry["propensity"] is None else f"{entry['propensity']:.3f}",
            f"{entry['outcomes']:,}", "-" if entry["rate"] is None else f"{entry['rate']:.3f}",
            shown,
        )  # fmt: skip
    console.print(table)
    if report["outcomes_with_propensity"]:
        console.print(
            "if every request: the inverse-propensity estimate (95% interval) over the "
            f"{report['outcomes_with_propensity']:,} outcomes of routed requests; an LLM "
            "routing never explored reads near 0 (no evidence), not worse"
        )
