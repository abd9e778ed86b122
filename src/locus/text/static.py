"""`StaticEncoder`: a static embedding model distilled from the bundled all-MiniLM-L6-v2 with
model2vec (one vector per token, computed by running MiniLM on the vocabulary, then PCA and Zipf
weighting); a text's vector is the mean of its tokens' vectors: no transformer at all at
encoding time. Built on first use into `model_cache_dir()`, as every derived model
(`locus.text.derived`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.extras import needs_extra
from locus.text.derived import (
    _build_once,
    _log,
    bundled_minilm_path,
    model_cache_dir,
    quiet_transformers,
)

__all__ = ["StaticEncoder"]

_PCA_DIMS = 256


@contextmanager
def _closing_leaked_files() -> Iterator[None]:
    """model2vec's save and load leave open files to the garbage collector: collect them here,
    without the ResourceWarning (an error under `-W error`)."""
    import gc
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        yield
        gc.collect()


def _distill_static(target: Path) -> None:
    """all-MiniLM-L6-v2 -> a model2vec static model (PCA to 256 dimensions)."""
    with needs_extra("distilling the static text encoder"):
        from model2vec.distill import distill

    started = time.perf_counter()
    _log(
        "preparing the static text encoder (once): distilling all-MiniLM-L6-v2 with model2vec "
        "(about a minute on 2 cores) ..."
    )
    with quiet_transformers():  # model2vec's own bar (tokens encoded, ETA) stays
        model = distill(model_name=str(bundled_minilm_path()), pca_dims=_PCA_DIMS)
    with _closing_leaked_files():
        model.save_pretrained(str(target))
    _log(f"static text encoder ready in {time.perf_counter() - started:.0f} s")


class StaticEncoder:
    """A model2vec static model distilled from all-MiniLM-L6-v2 (256-d, L2-normalised).

    Args:
        path: a model2vec model folder; default: distil the bundled MiniLM on first use.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self._path = None if path is None else Path(path)
        self._model: Any = None

    @property
    def name(self) -> str:
        if self._path is None:
            return f"all-MiniLM-L6-v2/static-{_PCA_DIMS}"
        return f"model2vec:{self._path.resolve()}"

    def _load(self) -> Any:
        if self._model is None:
            with needs_extra("the static text encoder"):
                from model2vec import StaticModel

            folder = self._path or _build_once(
                model_cache_dir() / f"all-MiniLM-L6-v2-static-{_PCA_DIMS}",
                "model.safetensors",
                _distill_static,
            )
            if not (folder / "model.safetensors").exists():
                raise LocusInputError(
                    f"{folder}: not a model2vec model folder (no model.safetensors)"
                )
            with _closing_leaked_files():
                self._model = StaticModel.from_pretrained(str(folder), normalize=True)
        return self._model

    @property
    def dim(self) -> int:
        return int(self._load().dim)

    def encode(self, texts: str | Sequence[str], *, batch_size: int = 1024) -> NDArray[np.float32]:
        single = isinstance(texts, str)
        items = [texts] if isinstance(texts, str) else [str(t) for t in texts]
        model = self._load()
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.asarray(
            model.encode(
                items,
                batch_size=max(batch_size, 1024),
                show_progress_bar=False,
                use_multiprocessing=False,
            ),
            dtype=np.float32,
        )
        return vectors[0] if single else vectors
