"""`locus serve`: the routing service and OpenAI-compatible gateway (see locus.server)."""

from __future__ import annotations

import ipaddress
import os
from typing import Annotated

import typer

from locus.cli._app import ArtifactOption, WorkspaceOption, app, open_store
from locus.cli._render import stderr_console
from locus.errors import LocusInputError


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command("serve")
def serve_command(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 8080,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Worker processes.")] = 1,
    no_auth: Annotated[
        bool,
        typer.Option("--no-auth", help="Serve without API keys (loopback addresses only)."),
    ] = False,
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
) -> None:
    """Serve routing (/v1/route) and an OpenAI-compatible gateway (/v1/chat/completions)."""
    import uvicorn

    if no_auth and not _loopback(host):
        raise LocusInputError(
            f"serve: --no-auth on {host!r} would let anyone on the network in; expected a "
            "loopback address such as 127.0.0.1"
        )
    with open_store(workspace, create=False) as store:
        path, spec = store.location, store.spec
        from locus.server.serve import SERVE_WORKSPACE_ENV, build_app

        # built here, so a broken workspace fails before anything listens
        application = build_app(store, artifact, auth=not no_auth)
        keys = [k for k in store.list_keys() if k["revoked_at"] is None]
        access = "no API keys (loopback only)" if no_auth else f"{len(keys)} live API keys"
        stderr_console().print(
            f"locus serve: workspace {path}, artifact {artifact!r}, http://{host}:{port} "
            f"({workers} worker{'s' if workers > 1 else ''}; {access})"
        )
        if not no_auth and not keys:
            stderr_console().print(
                "[yellow]no API key yet: every /v1 request will get 401; create one with "
                "`locus keys create NAME`, or serve with --no-auth on loopback[/]"
            )
        if workers == 1:
            uvicorn.run(application, host=host, port=port, log_level="warning")
            return
    # the worker processes open the same store (`app_from_env`)
    os.environ[SERVE_WORKSPACE_ENV], os.environ["LOCUS_ARTIFACT"] = spec, artifact
    os.environ["LOCUS_NO_AUTH"] = "1" if no_auth else "0"
    uvicorn.run(
        "locus.server.serve:app_from_env", factory=True, host=host, port=port,
        workers=workers, log_level="warning",
    )  # fmt: skip
