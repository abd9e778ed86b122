"""Build the service from a workspace: router, catalog endpoints, prices, gateway, app.

    >>> app = build_app(Store.open(".locus"))                            # doctest: +SKIP

`app_from_env` is the factory uvicorn calls in each worker process (`--workers N`): it reads
the workspace and artifact from LOCUS_SERVE_WORKSPACE / LOCUS_ARTIFACT.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from locus.data.llm_catalog import Endpoint
from locus.errors import LocusInputError
from locus.server.app import ServiceRouter, create_app
from locus.server.gateway import Gateway
from locus.server.settings import ServerSettings
from locus.server.upstream import Upstreams
from locus.store import Store

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["SERVE_WORKSPACE_ENV", "SETTINGS_ENV", "app_from_env", "build_app", "catalog_endpoints"]

# set by `locus serve --workers N` for its worker processes: the store to open (may hold a password)
SERVE_WORKSPACE_ENV = "LOCUS_SERVE_WORKSPACE"
SETTINGS_ENV = "LOCUS_SERVE_SETTINGS"  # and the server settings, as JSON


def catalog_endpoints(store: Store, llm_ids: list[str]) -> dict[str, Endpoint]:
    """Endpoints of the pool's LLMs from the workspace's catalog (`locus import llms`)."""
    catalog = store.llm_metadata()
    out = {}
    for llm in llm_ids:
        endpoint = Endpoint.from_json(catalog.get(llm, {}).get("endpoint"))
        if endpoint is not None:
            out[llm] = endpoint
    return out


def build_app(
    store: Store,
    artifact: str = "default",
    *,
    settings: ServerSettings | None = None,
    transport: Any = None,
    auth: bool = True,
) -> FastAPI:
    """The app over the workspace's router; LLMs without an endpoint are routed to by
    /v1/route but never called by /v1/chat/completions."""
    from locus.pipeline.workspace_router import WorkspaceRouter

    workspace_router = WorkspaceRouter(store, artifact)
    settings = settings or ServerSettings()
    # replicas sharing the store see each other's onboarded LLMs within `pool_check_s`
    router = ServiceRouter(
        workspace_router,
        pool_version=lambda: store.embeddings_version(artifact),
        check_every_s=settings.pool_check_s,
    )
    endpoints = catalog_endpoints(store, router.llm_ids)
    catalog = store.llm_metadata()
    gateway = Gateway(
        router.rank,
        Upstreams(endpoints, transport=transport),
        prices={llm: catalog.get(llm, {}) for llm in router.llm_ids},
        settings=settings,
        llm_ids=lambda: router.llm_ids,
    )
    from locus.server.onboard import LiveOnboarding
    from locus.server.onboard_jobs import OnboardJobs

    onboarding = LiveOnboarding(
        store, workspace_router, artifact, max_rows=10_000,
        refresh_every_s=settings.outcome_refresh_s,
    )  # fmt: skip

    def reload_catalog() -> dict[str, Any]:
        catalog = store.llm_metadata()
        return gateway.set_catalog(
            catalog_endpoints(store, router.llm_ids),
            {llm: catalog.get(llm, {}) for llm in router.llm_ids},
        )

    def onboard(llm_id: str, options: dict[str, Any], progress: Any) -> dict[str, Any]:
        from locus.pipeline.onboard import onboard_llm

        key_env = options.get("api_key_env")
        api_key = os.environ.get(key_env) if key_env else None
        if key_env and not api_key:
            raise LocusInputError(
                f"onboard: api_key_env {key_env} is not set in the server's environment"
            )
        report = onboard_llm(
            store, llm_id, Endpoint(options["base_url"], options.get("model") or llm_id, key_env),
            api_key=api_key, n=options.get("n", 32), strategy=options.get("strategy", "random"),
            seed=options.get("seed", 0), artifact=artifact, progress=progress,
        )  # fmt: skip
        workspace_router.refresh()
        reload_catalog()
        return report.as_dict()

    app = create_app(
        router, gateway, settings=settings, verify_key=store.verify_key if auth else None,
        onboarding=onboarding, reload_catalog=reload_catalog, onboard_jobs=OnboardJobs(onboard),
    )  # fmt: skip
    app.state.reload_catalog = reload_catalog  # `locus serve` reloads on SIGHUP too
    return app


def app_from_env() -> FastAPI:
    workspace = os.environ.get(SERVE_WORKSPACE_ENV)
    if not workspace:
        raise LocusInputError(
            f"{SERVE_WORKSPACE_ENV} is not set; start the service with locus serve"
        )
    store = Store.open(workspace, create=False)
    given = os.environ.get(SETTINGS_ENV)
    return build_app(
        store,
        os.environ.get("LOCUS_ARTIFACT", "default"),
        auth=os.environ.get("LOCUS_NO_AUTH") != "1",
        settings=ServerSettings.from_json(given) if given else None,
    )
