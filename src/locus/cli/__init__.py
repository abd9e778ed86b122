"""The `locus` command line: parse, make one library call, render (table, --json or plot).

    _app.py             the typer app and shared options
    _render.py          JSON, number formats, one-line summaries (re-exports _terminal's)
    _terminal.py        consoles, progress bars, the training bar
    _help.py            `locus --help` in working order (grouped by the job)
    import_commands.py  import FORMAT PATH... (auto, table, lm-eval, inspect, helm, ...)
    _import_plan.py     what an import decides before it writes: formats, options, sources
    data_commands.py    llms, stats, encode
    model_commands.py   fit, embed, evaluate, outcomes, probes
    _evaluation.py      what evaluate shows: tables, the winning baseline, savings, --plot
    onboard_commands.py onboard NAME --endpoint URL (probe, grade, import, embed, place)
    route_commands.py   route
    benchmark_commands.py  benchmark SUITE
    benchmark_suites.py    the onboarding, newcomers and cost suites' runs and tables
    atlas_commands.py   similar, geometry, cluster, atlas, portfolio, proxy
    search_commands.py  identify, search (they embed new evidence)
    sources_commands.py sources, remove-source
    serve_commands.py   serve (the routing service and gateway, locus.server)
    keys_commands.py    keys create | list | revoke
    decisions_commands.py  decisions (the gateway's decision log: summed up, exported)
    canary_commands.py  canary record | check (an endpoint changed behind its name?)
    demo.py             demo: the main job end to end

Progress goes to stderr: live bars in a terminal; elsewhere (a pipe, a log file, CI) plain
lines, flushed, when a stage starts, every tenth of its steps or every `$LOCUS_PROGRESS_SECONDS`
(default 30) seconds, whichever comes first, with the time elapsed and an estimate of the time
left, and when it ends. `-q` or `$LOCUS_NO_PROGRESS` silences them. Without a terminal, output
lines are never wrapped or cut to a console width.

Errors from the library arrive as `LocusError`; they are printed on one line to stderr and the
process exits with the error's exit code (2 for bad input), the store unchanged. Under
`--json` every error, a usage error included, is instead one JSON object on stdout,
``{"error": ..., "kind": ..., "hint": ...}``, with the same exit code.
"""

from __future__ import annotations

import sys

from locus.cli import (  # noqa: F401
    atlas_commands,
    benchmark_commands,
    canary_commands,
    data_commands,
    decisions_commands,
    demo,
    import_commands,
    keys_commands,
    model_commands,
    onboard_commands,
    route_commands,
    search_commands,
    serve_commands,
    sources_commands,
)
from locus.cli._app import CommandInterrupted, app
from locus.cli._help import arrange_help
from locus.errors import LocusError
from locus.extras import missing_extra

arrange_help(app)  # `locus --help` in working order, once every command is registered

__all__ = ["app", "main"]


def main() -> None:
    """Entry point: run the app, turning `LocusError` into one line on stderr (JSON on stdout
    under --json) and an exit code."""
    import logging

    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
    as_json = "--json" in sys.argv[1:]
    sys.argv[1:] = _ray_without_value(sys.argv[1:])
    try:
        code = app(standalone_mode=False)
    except LocusError as error:
        _fail(" ".join(str(error).split("\n")), type(error).__name__, error.exit_code, as_json)
    except CommandInterrupted as said:
        _fail(str(said), "KeyboardInterrupt", 130, as_json)
    except KeyboardInterrupt:  # outside a command (typer turns one inside into exit code 130)
        code = INTERRUPTED
    except ModuleNotFoundError as error:  # a package of an extra this install lacks
        explained = missing_extra(error, f"`locus {_command(sys.argv[1:])}`")
        if explained is None:
            raise
        _fail(str(explained), type(explained).__name__, explained.exit_code, as_json)
    except Exception as error:
        # typer's own click: a usage error (bad option, missing argument) or an abort
        if hasattr(error, "format_message") and hasattr(error, "exit_code"):
            if not as_json:
                error.show()  # type: ignore[attr-defined]
                raise SystemExit(error.exit_code) from None
            _fail(error.format_message(), "UsageError", error.exit_code, as_json)
        if type(error).__name__ == "Abort":
            _fail("aborted", "Abort", 1, as_json)
        raise
    if code == INTERRUPTED:
        _fail("interrupted; nothing half-written was kept", "KeyboardInterrupt", code, as_json)
    raise SystemExit(code if isinstance(code, int) else 0)


INTERRUPTED = 130  # the exit code of a command stopped by Ctrl-C (128 + SIGINT)


def _ray_without_value(args: list[str]) -> list[str]:
    """`--ray` given alone (last, or before another option) means a local Ray instance: the
    option takes a value, so "local" is put in its place."""
    from locus.ray_cluster import LOCAL

    out: list[str] = []
    for i, arg in enumerate(args):
        out.append(arg)
        if arg == "--ray" and (i + 1 == len(args) or args[i + 1].startswith("-")):
            out.append(LOCAL)
    return out


def _command(args: list[str]) -> str:
    """The command's name: the first argument that is not an option."""
    return next((arg for arg in args if not arg.startswith("-")), "")


def _fail(message: str, kind: str, code: int, as_json: bool) -> None:
    """Report an error (stderr, or JSON on stdout) and exit with `code`."""
    if as_json:
        import json

        _, sep, hint = message.rpartition("; ")
        payload = {"error": message, "kind": kind, "hint": hint if sep else None}
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        sys.stderr.write(f"error: {message}\n" if kind != "KeyboardInterrupt" else message + "\n")
    raise SystemExit(code)


if __name__ == "__main__":
    main()
