"""The typer application, the options every command shares, and the helpers they share
(opening the workspace, KEY=VALUE options)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Annotated

import typer

from locus.errors import LocusInputError

if TYPE_CHECKING:
    from locus.ray_cluster import RaySession
    from locus.store import Store

__all__ = [
    "ArtifactOption",
    "CommandInterrupted",
    "JsonOption",
    "QuietOption",
    "WorkspaceOption",
    "app",
    "open_store",
    "parse_pairs",
]

app = typer.Typer(
    name="locus",
    help="Map a pool of LLMs from their evaluation results.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class CommandInterrupted(Exception):
    """Ctrl-C stopped a command; the message says what it kept. `locus.cli.main` prints it and
    exits 130 (typer alone would exit 130 in silence)."""


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
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress bars or lines, and no notes.")
]
RayOption = Annotated[
    str | None,
    typer.Option(
        "--ray",
        metavar="[ADDRESS]",
        help="Run on Ray (pip install 'locus[ray]'): alone, a Ray instance started on this "
        "machine; 'auto', the cluster this machine joined; HOST:PORT or ray://HOST:PORT, that "
        "cluster's head. Put it after the command's arguments.",
        show_default=False,
    ),
]
ArtifactOption = Annotated[
    str, typer.Option("--artifact", help="Name of the trained artifact in the workspace.")
]


def ray_or_nothing(address: str | None) -> AbstractContextManager[RaySession | None]:
    """`--ray`'s session for a `with` block (`locus.ray_cluster.ray_session`), or None without
    the option."""
    if address is None:
        return nullcontext(None)
    from locus.ray_cluster import ray_session

    return ray_session(address)


def open_store(workspace: str | None, *, create: bool = True) -> Store:
    """The workspace a command names (`--workspace`), opened (created unless `create` is
    False: then a missing one is an error saying so); a write that waits for another
    process's lock says so on stderr."""
    from locus.store import Store

    return Store.open(workspace, create=create, on_wait=_say_waiting)


def _say_waiting(location: str, limit_s: float | None) -> None:
    from locus.cli._render import stderr_console

    limit = "" if limit_s is None else f" (waiting up to {limit_s:g} s)"
    stderr_console().print(
        f"waiting for another import to finish: another process holds the write lock of "
        f"workspace {location}{limit}",
        markup=False,
        highlight=False,
    )


def parse_pairs(values: list[str], option: str, expected: str) -> dict[str, str]:
    """{KEY: VALUE} of `--option KEY=VALUE` values; a malformed one names the option."""
    mapping: dict[str, str] = {}
    for pair in values:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise LocusInputError(f"{option} {pair!r}: expected {expected}")
        mapping[key.strip()] = value.strip()
    return mapping
