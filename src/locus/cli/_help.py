"""`locus --help` in working order: the commands grouped by the job, each group in the order a
new user meets them (demo, import, fit, evaluate, route; then onboarding, the map, serving),
each command's one-line summary its docstring's first paragraph on one line."""

from __future__ import annotations

from typing import Any

__all__ = ["PANELS", "arrange_help"]

# (panel, its commands in working order); a command not named here goes to "More"
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Start here", ("demo", "import", "fit", "evaluate", "route")),
    ("Your data", ("llms", "sources", "remove-source", "stats", "encode")),
    ("A new LLM", ("probes", "onboard", "embed", "identify")),
    ("The map", ("atlas", "similar", "cluster", "portfolio", "proxy", "search", "geometry")),
    ("Serve", ("serve", "outcomes", "decisions", "canary", "keys")),
    ("Research", ("benchmark",)),
)


def _summary(text: str | None) -> str | None:
    """The first paragraph of a docstring, its lines joined."""
    if not text:
        return None
    return " ".join(text.strip().split("\n\n", 1)[0].split())


def arrange_help(app: Any) -> None:
    """Order `app`'s commands and groups by `PANELS` and put each under its panel's heading
    (typer's `rich_help_panel`); call once, after every command is registered."""
    place = {
        name: (rank, order, panel)
        for rank, (panel, names) in enumerate(PANELS)
        for order, name in enumerate(names)
    }
    last = (len(PANELS), 0, "More")

    def key(info: Any) -> tuple[int, int]:
        rank, order, _ = place.get(_name(info), last)
        return rank, order

    for infos in (app.registered_commands, app.registered_groups):
        infos.sort(key=key)
        for info in infos:
            info.rich_help_panel = place.get(_name(info), last)[2]
            if getattr(info, "short_help", None) is None and info.callback is not None:
                info.short_help = _summary(info.help or info.callback.__doc__)


def _name(info: Any) -> str:
    if info.name:
        return str(info.name)
    callback = getattr(info, "callback", None)
    return callback.__name__.replace("_command", "").replace("_", "-") if callback else ""
