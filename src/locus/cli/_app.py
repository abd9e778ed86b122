"""The typer application and the options every command shares."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["ArtifactOption", "JsonOption", "QuietOption", "WorkspaceOption", "app"]

app = typer.Typer(
    name="locus",
    help="Map a pool of LLMs from their evaluation results.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

WorkspaceOption = Annotated[
    str | None,
    typer.Option(
        "--workspace",
        "-w",
        help=(
            "Workspace directory or PostgreSQL URL (default: $LOCUS_DATABASE_URL, else "
            "$LOCUS_WORKSPACE, else ./.locus)."
        ),
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON to stdout for scripts.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
ArtifactOption = Annotated[
    str, typer.Option("--artifact", help="Name of the trained artifact in the workspace.")
]
