"""`locus sources` and `locus remove-source`: what each import brought, and taking one back."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from locus.cli._app import JsonOption, WorkspaceOption, app, open_store
from locus.cli._render import note, print_json, stdout_console
from locus.errors import LocusInputError

__all__ = ["remove_source_command", "sources_command", "stale_artifacts", "tell_stale"]


@app.command("sources")
def sources_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    """List the workspace's sources (one per import): format, file, LLMs, scores, when."""
    with open_store(workspace, create=False) as store:
        rows = store.sources().to_dict("records")
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table("source", "format", "LLMs", "scores", "last imported", "from")
    for row in rows:
        table.add_row(
            str(row["name"]),
            str(row["kind"]),
            f"{int(row['llms']):,}",
            f"{int(row['scores']):,}",
            str(row["last_imported_at"])[:19],
            str(row["origin"]),
        )
    stdout_console().print(table)


@app.command("remove-source")
def remove_source_command(
    name: Annotated[str, typer.Argument(help="The source to remove (see `locus sources`).")],
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Remove without asking (for scripts).")
    ] = False,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove a source: its scores, its query ids, and the queries no other source has (one
    transaction). Re-import a corrected file afterwards, or use `locus import ... --replace`."""
    with open_store(workspace, create=False) as store:
        known = store.sources()
        row = known[known["name"] == name]
        if len(row) and not yes:
            if as_json or not sys.stdin.isatty():
                raise LocusInputError(
                    f"remove-source {name}: pass --yes to remove its "
                    f"{int(row['scores'].iloc[0]):,} scores (no terminal to ask on)"
                )
            typer.confirm(
                f"remove source {name!r}: {int(row['scores'].iloc[0]):,} scores of "
                f"{int(row['llms'].iloc[0]):,} LLMs?",
                abort=True,
            )
        removed = store.remove_source(name)
        stale = stale_artifacts(store)
    if as_json:
        print_json({**removed, "stale_artifacts": stale})
        return
    stdout_console().print(
        f"removed source {name}: {removed['scores']:,} scores, {removed['aliases']:,} query ids, "
        f"{removed['queries']:,} queries no other source had"
    )
    tell_stale(stale)


def stale_artifacts(store: Any) -> list[str]:
    """The workspace's artifacts fitted on other data than the workspace holds now (their
    manifest's data checksums differ), by name."""
    from locus.artifact import Manifest
    from locus.artifact.layout import read_artifact_config
    from locus.errors import LocusError

    folder = store.artifacts_dir
    if not folder.is_dir():
        return []
    checksums = store.checksums()
    stale = []
    for artifact in sorted(
        p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")
    ):
        try:
            manifest = Manifest.from_dict(read_artifact_config(artifact).get("metadata"))
        except LocusError:
            continue
        if manifest.data_checksums is not None and manifest.data_checksums != checksums:
            stale.append(artifact.name)
    return stale


def tell_stale(stale: list[str], *, quiet: bool = False) -> None:
    """A note on stderr naming the stale artifacts and what to re-run; nothing for none, or
    with `quiet`."""
    if stale:
        names = ", ".join(stale)
        note(
            f"artifact(s) {names} were fitted on the data before this change; routing keeps "
            "using them until you re-run `locus fit` (and `locus encode` for new queries)",
            quiet=quiet,
        )
