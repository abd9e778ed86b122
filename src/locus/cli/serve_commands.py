"""`locus serve`: the routing service and OpenAI-compatible gateway (see locus.server)."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path
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


def _reload_on_sighup(application: object) -> None:
    """`kill -HUP <pid>` re-reads the LLM catalog (as POST /v1/catalog/reload does) instead
    of ending the server."""
    import signal

    reload = getattr(getattr(application, "state", None), "reload_catalog", None)
    if reload is None or not hasattr(signal, "SIGHUP"):
        return

    def handle(signum: int, frame: object) -> None:
        changed = reload()
        stderr_console().print(f"locus serve: catalog reloaded on SIGHUP: {changed}", markup=False)

    signal.signal(signal.SIGHUP, handle)


def _check_port(host: str, port: int) -> None:
    """Refuse a port already taken before anything is loaded or announced."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise LocusInputError(
                f"serve: cannot listen on {host}:{port} ({error.strerror or error}); another "
                "process holds the port: stop it or choose --port"
            ) from None


@app.command("serve")
def serve_command(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 8080,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Worker processes.")] = 1,
    no_auth: Annotated[
        bool,
        typer.Option("--no-auth", help="Serve without API keys (loopback addresses only)."),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="A TOML file of server settings (names of the options below)."
        ),
    ] = None,
    attempts: Annotated[
        int | None, typer.Option("--attempts", min=1, help="LLMs tried per chat request [3].")
    ] = None,
    retries: Annotated[
        int | None,
        typer.Option("--retries", min=0, help="Same-LLM retries after a transient failure [1]."),
    ] = None,
    first_token_timeout: Annotated[
        float | None,
        typer.Option(
            "--first-token-timeout", min=0.1, help="Seconds to a stream's first token [10]."
        ),
    ] = None,
    stall_timeout: Annotated[
        float | None,
        typer.Option("--stall-timeout", min=0.1, help="Seconds a stream may go silent [10]."),
    ] = None,
    attempt_timeout: Annotated[
        float | None,
        typer.Option("--attempt-timeout", min=0.1, help="Seconds per non-streaming call [30]."),
    ] = None,
    total_timeout: Annotated[
        float | None,
        typer.Option("--total-timeout", min=0.1, help="Seconds for every attempt together [60]."),
    ] = None,
    explore: Annotated[
        float | None,
        typer.Option(
            "--explore",
            min=0.0,
            max=1.0,
            help="Share of routed chat requests sent by a Thompson draw on the uncertainty, so "
            "LLMs the router is unsure of get outcomes [0: off]; a request's `explore` field "
            "overrides it.",
        ),
    ] = None,
    decision_log: Annotated[
        str | None,
        typer.Option(
            "--decision-log",
            help="What the workspace's decision log (locus decisions) keeps of each chat "
            "request's text: hash [default], text (the log is then evidence a fit can read), "
            "or off.",
        ),
    ] = None,
    outcome_max_age: Annotated[
        float | None,
        typer.Option(
            "--outcome-max-age",
            min=0.0,
            help="Days after which a posted outcome leaves routing's votes [0: never].",
        ),
    ] = None,
    canary_every: Annotated[
        float | None,
        typer.Option(
            "--canary-every",
            min=0.0,
            help="Seconds between canary checks of the LLMs with a baseline (locus canary "
            "record) [0: off].",
        ),
    ] = None,
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
) -> None:
    """Serve routing (/v1/route) and an OpenAI-compatible gateway (/v1/chat/completions).

    Retries, timeouts and attempts come from --config (a TOML file of `ServerSettings`
    names), then these options."""
    import uvicorn

    from locus.server.settings import ServerSettings

    if no_auth and not _loopback(host):
        raise LocusInputError(
            f"serve: --no-auth on {host!r} would let anyone on the network in; expected a "
            "loopback address such as 127.0.0.1"
        )
    settings = ServerSettings.from_file(config) if config is not None else ServerSettings()
    settings = settings.with_(
        max_attempts=attempts, retries_per_llm=retries, first_token_timeout_s=first_token_timeout,
        stall_timeout_s=stall_timeout, attempt_timeout_s=attempt_timeout,
        total_timeout_s=total_timeout, explore=explore, decision_log=decision_log,
        outcome_max_age_days=outcome_max_age, canary_every_s=canary_every,
    )  # fmt: skip
    _check_port(host, port)
    with open_store(workspace, create=False) as store:
        path, spec = store.location, store.spec
        from locus.server.app import SERVE_WORKSPACE_ENV, SETTINGS_ENV, build_app

        # built here, so a broken workspace fails before anything listens
        application = build_app(store, artifact, auth=not no_auth, settings=settings)
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
            _reload_on_sighup(application)
            uvicorn.run(application, host=host, port=port, log_level="warning")
            return
    # the worker processes open the same store with the same settings (`app_from_env`)
    os.environ[SERVE_WORKSPACE_ENV], os.environ["LOCUS_ARTIFACT"] = spec, artifact
    os.environ[SETTINGS_ENV] = settings.to_json()
    os.environ["LOCUS_NO_AUTH"] = "1" if no_auth else "0"
    uvicorn.run(
        "locus.server.app:app_from_env", factory=True, host=host, port=port,
        workers=workers, log_level="warning",
    )  # fmt: skip
