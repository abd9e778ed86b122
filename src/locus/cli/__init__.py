"""The `locus` command line: parse, make one library call, render (table, --json or plot).

    _app.py             the typer app and shared options
    _render.py          consoles, progress bars, JSON, number formats
    data_commands.py    import, llms, stats, encode
    model_commands.py   fit, embed, evaluate
    route_commands.py   route
    benchmark_commands.py  benchmark SUITE
    atlas_commands.py   similar, geometry, cluster, atlas, portfolio, proxy
    search_commands.py  identify, search (they embed new evidence)
    serve_commands.py   serve (the routing service and gateway, locus.server)
    keys_commands.py    keys create | list | revoke
    demo.py             demo: the main job end to end

Errors from the library arrive as `LocusError`; they are printed on one line to stderr and the
process exits with the error's exit code (2 for bad input), the store unchanged.
"""

from __future__ import annotations

import sys

from locus.cli import (  # noqa: F401
    atlas_commands,
    benchmark_commands,
    data_commands,
    demo,
    keys_commands,
    model_commands,
    route_commands,
    search_commands,
    serve_commands,
)
from locus.cli._app import app
from locus.errors import LocusError

__all__ = ["app", "main"]


def main() -> None:
    """Entry point: run the app, turning `LocusError` into one line on stderr and an exit code."""
    import logging

    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
    try:
        app()
    except LocusError as error:
        message = " ".join(str(error).split("\n"))
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(error.exit_code) from None
    except KeyboardInterrupt:
        sys.stderr.write("interrupted; nothing half-written was kept\n")
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
