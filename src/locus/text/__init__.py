"""Text encoders (query text -> query vector) and the vector cache."""

from __future__ import annotations

from locus.errors import LocusInputError
from locus.text.base import TextEncoder
from locus.text.derived import OnnxEncoder, StaticEncoder
from locus.text.hashing import HashingEncoder
from locus.text.sentence_transformers import SentenceTransformerEncoder

__all__ = [
    "DEFAULT_TEXT_ENCODER",
    "TEXT_ENCODERS",
    "HashingEncoder",
    "OnnxEncoder",
    "SentenceTransformerEncoder",
    "StaticEncoder",
    "TextEncoder",
    "get_text_encoder",
]

# Short names `locus encode --encoder NAME` takes, with what they are. Each encoder's own `name`
# (what workspaces and artifacts record) is accepted too.
TEXT_ENCODERS = {
    "minilm-static": "all-MiniLM-L6-v2 distilled to static token vectors with model2vec, 256-d",
    "minilm-onnx": "all-MiniLM-L6-v2 on ONNX Runtime, float32 (the torch vectors), 384-d",
    "minilm-onnx-int8": "all-MiniLM-L6-v2 on ONNX Runtime, int8 weights, 384-d",
    "minilm": "all-MiniLM-L6-v2 through sentence-transformers and torch, 384-d",
    "mpnet": "sentence-transformers/all-mpnet-base-v2 (the paper's; needs the hub), 768-d",
}
DEFAULT_TEXT_ENCODER = "minilm-static"
_TORCH_MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def get_text_encoder(spec: str | None = None, *, device: str = "cpu") -> TextEncoder:
    """A text encoder by name: one of `TEXT_ENCODERS` (default `minilm-static`), the `name` an
    encoder records (``"all-MiniLM-L6-v2/onnx"``), ``"model2vec:FOLDER"``, ``"hashing-64"``
    (tests only), or any sentence-transformers hub name or folder."""
    spec = (spec or DEFAULT_TEXT_ENCODER).strip()
    lowered = spec.lower()
    if lowered in ("minilm-static", StaticEncoder().name.lower()):
        return StaticEncoder()
    if lowered.startswith("model2vec:"):
        return StaticEncoder(spec.split(":", 1)[1])
    if lowered in ("minilm-onnx", OnnxEncoder().name.lower()):
        return OnnxEncoder()
    if lowered in ("minilm-onnx-int8", OnnxEncoder(quantized=True).name.lower()):
        return OnnxEncoder(quantized=True)
    if lowered == "minilm":
        spec = _TORCH_MINILM
    if lowered == "mpnet":
        spec = "sentence-transformers/all-mpnet-base-v2"
    if spec == "hashing" or spec.startswith("hashing-"):
        size = spec.removeprefix("hashing").removeprefix("-") or "64"
        if not size.isdigit():
            raise LocusInputError(
                f"text encoder {spec!r}: expected 'hashing-<dim>' such as hashing-64, "
                f"found {spec!r}"
            )
        return HashingEncoder(int(size))
    return SentenceTransformerEncoder(spec, device=device)
