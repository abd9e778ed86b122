"""`locus keys create | list | revoke`: API keys of `locus serve`, stored hashed."""

from __future__ import annotations

from typing import Annotated

import typer

from locus.cli._app import JsonOption, WorkspaceOption, app, open_store
from locus.cli._render import fmt, print_json, stdout_console

keys_app = typer.Typer(
    help="API keys of locus serve (stored hashed; shown once).", no_args_is_help=True
)
app.add_typer(keys_app, name="keys")


@keys_app.command("create")
def create_command(
    name: Annotated[str, typer.Argument(help="Who or what uses the key, e.g. ci-bot.")],
    no_substitution: Annotated[
        bool,
        typer.Option(
            "--no-substitution",
            help="A request of this key that names an LLM is answered by that LLM or fails "
            "(503 naming why): no other LLM in its place. Routed requests still fall back.",
        ),
    ] = False,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a key; the secret is printed once and never stored."""
    with open_store(workspace, create=False) as store:
        key_id, secret = store.create_key(name, substitute=not no_substitution)
    if as_json:
        print_json({"id": key_id, "name": name, "key": secret, "substitute": not no_substitution})
        return
    pinned = "; requests naming an LLM get it or an error" if no_substitution else ""
    stdout_console().print(
        f"key {key_id} for {name!r}{pinned}:\n{secret}\nkeep it now: only its hash is stored "
        "(send it as Authorization: Bearer <key>)"
    )


@keys_app.command("list")
def list_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    """Every key: id, name, created, revoked, whether pinned requests may be substituted."""
    with open_store(workspace, create=False) as store:
        keys = store.list_keys()
    if as_json:
        print_json(keys)
        return
    from rich.table import Table

    table = Table(title=f"{len(keys)} API keys")
    for column in ("id", "name", "created", "revoked", "pinned requests"):
        table.add_column(column)
    for key in keys:
        substitution = "may fall back" if key["substitute"] else "no substitution"
        row = (key["id"], key["name"], key["created_at"], fmt(key["revoked_at"]), substitution)
        table.add_row(*row)
    stdout_console().print(table)


@keys_app.command("revoke")
def revoke_command(
    key_id: Annotated[str, typer.Argument(help="The key's id (locus keys list).")],
    workspace: WorkspaceOption = None,
) -> None:
    """Revoke a key: requests with it are refused from the next one on."""
    with open_store(workspace, create=False) as store:
        store.revoke_key(key_id)
    stdout_console().print(f"key {key_id} revoked")
