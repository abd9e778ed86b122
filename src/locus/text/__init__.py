"""Text encoders (query text -> query vector) and the vector cache.

protocol.py               the TextEncoder protocol
derived.py                OnnxEncoder (int8 default, float32), derived locally from the
                          bundled all-MiniLM-L6-v2, and the cache of derived models
static.py                 StaticEncoder: model2vec distilled from the same weights
sentence_transformers.py  SentenceTransformerEncoder: any sentence-transformers model
hashing.py                HashingEncoder: deterministic bag of words, for tests
cache.py                  encode_missing: vectors encoded once, cached in the store
ray_encode.py             RayChunkEncoder: encode_missing's chunks encoded by Ray workers
query_vectors.py          QueryVectors: a routed text's vector from the store, memory or the
                          encoder (the service the workspace router is given)"""

from __future__ import annotations

from locus.errors import LocusInputError
from locus.text.derived import MINILM_NAME, OnnxEncoder, bundled_minilm_path
from locus.text.hashing import HashingEncoder
from locus.text.protocol import TextEncoder
from locus.text.sentence_transformers import SentenceTransformerEncoder
from locus.text.static import StaticEncoder

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
    "minilm-onnx": "all-MiniLM-L6-v2 on ONNX Runtime, float32: the torch vectors, no torch; 384-d",
    "minilm": "all-MiniLM-L6-v2 through sentence-transformers and torch, 384-d",
    "minilm-onnx-int8": "all-MiniLM-L6-v2 on ONNX Runtime, int8 weights (other vectors); a text "
    "over 256 tokens keeps its first 64 and last 192; 384-d",
    "minilm-onnx-int8-head": "the same cut after 256 tokens (the default before 2026-12-03)",
    "minilm-static": "all-MiniLM-L6-v2 distilled to static token vectors with model2vec, 256-d",
    "mpnet": "sentence-transformers/all-mpnet-base-v2 (the paper's; needs the hub), 768-d",
}
# Chosen on the encoder table of benchmarks/README.md: int8 encodes 2.5x faster than float32
# (79 vs 33 texts/s on 2 cores) in a quarter of the memory, with LOCUS hit@1 and AUROC within
# one standard error of float32's on MMLU-Pro, ZeroEval and split2_model7 (3 seeds each); the
# static model is 100x faster but costs 3-4 points of AUROC on every pool. Its long texts keep
# their head and tail: few-shot prompts otherwise collapse into one vector per task
# (benchmarks/README, "Few-shot prompts, one vector").
DEFAULT_TEXT_ENCODER = "minilm-onnx-int8"


def get_text_encoder(spec: str | None = None, *, device: str = "cpu") -> TextEncoder:
    """A text encoder by name: one of `TEXT_ENCODERS` (default `minilm-onnx-int8`; without the
    bundled MiniLM package, the torch MiniLM from a hub), the `name` an
    encoder records (``"sentence-transformers/all-MiniLM-L6-v2"`` gives the ONNX backend of the
    same vectors), ``"model2vec:FOLDER"``, ``"hashing-64"`` (tests only), or any
    sentence-transformers hub name or folder."""
    if spec is None:
        try:
            bundled_minilm_path()
        except LocusInputError:
            return SentenceTransformerEncoder(MINILM_NAME, device=device)
    spec = (spec or DEFAULT_TEXT_ENCODER).strip()
    lowered = spec.lower()
    if lowered in ("minilm-static", StaticEncoder().name.lower()):
        return StaticEncoder()
    if lowered.startswith("model2vec:"):
        return StaticEncoder(spec.split(":", 1)[1])
    if lowered in ("minilm-onnx", MINILM_NAME.lower(), "all-minilm-l6-v2"):
        # the MiniLM vectors: ONNX Runtime from the bundled model; without that package, the
        # torch backend (which can also load from a reachable hub)
        try:
            bundled_minilm_path()
        except LocusInputError:
            return SentenceTransformerEncoder(MINILM_NAME, device=device)
        return OnnxEncoder()
    head_tail = OnnxEncoder(quantized=True, truncation="head+tail")
    if lowered in ("minilm-onnx-int8", head_tail.name.lower()):
        return head_tail
    if lowered in ("minilm-onnx-int8-head", OnnxEncoder(quantized=True).name.lower()):
        return OnnxEncoder(quantized=True)  # workspaces and artifacts of earlier versions
    if lowered == OnnxEncoder(truncation="head+tail").name.lower():
        return OnnxEncoder(truncation="head+tail")
    if lowered == "minilm":
        return SentenceTransformerEncoder(MINILM_NAME, device=device)
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
