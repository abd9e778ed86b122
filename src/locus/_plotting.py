"""matplotlib for the PNG pictures (benchmark reports, the atlas), loaded only when asked for."""

from __future__ import annotations

from typing import Any

from locus.errors import LocusInputError

__all__ = ["pyplot"]


def pyplot() -> Any:
    """`matplotlib.pyplot` on the Agg backend (no display needed).

    Raises:
        LocusInputError: matplotlib is not installed (it is the `plots` extra).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise LocusInputError("pictures need matplotlib: pip install 'locus[plots]'") from None
    return plt
