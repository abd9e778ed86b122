"""Text encoders: one contract for every implementation, plus the vector cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from locus.data.batch import ImportBatch
from locus.errors import LocusInputError, LocusNotFoundError
from locus.store import Store
from locus.text import (
    DEFAULT_TEXT_ENCODER,
    HashingEncoder,
    OnnxEncoder,
    SentenceTransformerEncoder,
    StaticEncoder,
    TextEncoder,
    get_text_encoder,
)
from locus.text.cache import encode_missing
from tests.conftest import planted_long_table


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEncoder:
    encoder = SentenceTransformerEncoder()
    try:
        encoder.dim  # noqa: B018 - loads the bundled model
    except LocusInputError as error:
        pytest.skip(f"bundled default encoder unavailable: {error}")
    return encoder


@pytest.fixture(scope="module")
def onnx_fp32(minilm: SentenceTransformerEncoder) -> OnnxEncoder:
    return OnnxEncoder()


@pytest.fixture(scope="module")
def onnx_int8(minilm: SentenceTransformerEncoder) -> OnnxEncoder:
    return OnnxEncoder(quantized=True)


@pytest.fixture(scope="module")
def static(minilm: SentenceTransformerEncoder) -> StaticEncoder:
    return StaticEncoder()


@pytest.fixture(params=["hashing", "minilm", "onnx_fp32", "onnx_int8", "static"])
def encoder(request: pytest.FixtureRequest) -> TextEncoder:
    if request.param == "hashing":
        return HashingEncoder(dim=32)
    return request.getfixturevalue(request.param)


TEXTS = [
    "What is the derivative of x squared with respect to x?",
    "Which court hears appeals of federal criminal cases?",
    "Which enzyme unwinds the DNA double helix during replication?" * 30,  # truncated
    "ok",
]


def test_onnx_float32_gives_the_torch_vectors(
    minilm: SentenceTransformerEncoder, onnx_fp32: OnnxEncoder
) -> None:
    np.testing.assert_allclose(onnx_fp32.encode(TEXTS), minilm.encode(TEXTS), atol=1e-4)
    assert onnx_fp32.name == minilm.name  # same vectors, one name: either backend reads them


def test_int8_and_static_are_close_to_but_not_the_torch_vectors(
    minilm: SentenceTransformerEncoder, onnx_int8: OnnxEncoder, static: StaticEncoder
) -> None:
    reference = minilm.encode(TEXTS)
    cosine = (onnx_int8.encode(TEXTS) * reference).sum(axis=1)
    assert (cosine > 0.8).all() and (cosine < 0.99999).any()
    assert static.dim == 256 and static.encode(TEXTS).shape == (4, 256)
    names = {minilm.name, onnx_int8.name, static.name}
    assert len(names) == 3  # different vectors, different cache keys


def test_every_short_name_resolves_and_round_trips() -> None:
    for short, expected, recorded in [
        ("minilm-static", StaticEncoder, StaticEncoder),
        ("minilm-onnx", OnnxEncoder, OnnxEncoder),
        ("minilm-onnx-int8", OnnxEncoder, OnnxEncoder),
        ("minilm-onnx-int8-head", OnnxEncoder, OnnxEncoder),
        ("minilm", SentenceTransformerEncoder, OnnxEncoder),  # same vectors: routed by ONNX
    ]:
        encoder = get_text_encoder(short)
        assert isinstance(encoder, expected)
        # the recorded name gives an encoder of the same vectors back (what routing does)
        again = get_text_encoder(encoder.name)
        assert type(again) is recorded and again.name == encoder.name
    assert get_text_encoder().name == "all-MiniLM-L6-v2/onnx-int8/head+tail"
    assert get_text_encoder("minilm-onnx-int8-head").name == "all-MiniLM-L6-v2/onnx-int8"
    assert get_text_encoder(DEFAULT_TEXT_ENCODER).name == get_text_encoder().name
    assert get_text_encoder("mpnet").name == "sentence-transformers/all-mpnet-base-v2"


def test_contract_shapes_and_determinism(encoder: TextEncoder) -> None:
    assert isinstance(encoder, TextEncoder)
    one = encoder.encode("What is the capital of France?")
    many = encoder.encode(["What is the capital of France?", "Integrate x^2 dx."])
    assert one.shape == (encoder.dim,) and many.shape == (2, encoder.dim)
    assert one.dtype == np.float32 and many.dtype == np.float32
    np.testing.assert_allclose(one, many[0], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(many, axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose(encoder.encode(["Integrate x^2 dx."])[0], many[1], atol=1e-5)


@pytest.mark.parametrize("quantized", [False, True])
def test_onnx_vectors_do_not_depend_on_batch_mates_or_sessions(
    minilm: SentenceTransformerEncoder, quantized: bool
) -> None:
    # many texts run on per-core sessions side by side (int8), a few on one session: a text's
    # vector must be the same either way, or the cache would hold vectors of two encoders
    encoder = OnnxEncoder(quantized=quantized, threads=2)
    texts = [f"Question {i}: {TEXTS[i % 3]}" for i in range(3 * OnnxEncoder._PARALLEL_FROM)]
    together = encoder.encode(texts)
    if quantized:
        assert len(encoder._workers) == 2  # the bulk path ran
    alone = np.stack([encoder.encode(text) for text in texts[:5]])
    np.testing.assert_allclose(together[:5], alone, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-4)  # all filled


def test_onnx_threads_must_be_positive() -> None:
    with pytest.raises(LocusInputError, match="threads"):
        OnnxEncoder(threads=0)


def test_related_texts_are_closer(encoder: TextEncoder) -> None:
    vectors = encoder.encode(
        [
            "What is the derivative of x squared with respect to x?",
            "Compute the derivative of x squared.",
            "Which court hears appeals of federal criminal cases?",
        ]
    )
    similar = float(vectors[0] @ vectors[1])
    unrelated = float(vectors[0] @ vectors[2])
    assert similar > unrelated


def test_torch_minilm_is_offline(minilm: SentenceTransformerEncoder) -> None:
    assert minilm.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert minilm.dim == 384
    assert get_text_encoder("all-MiniLM-L6-v2").name == minilm.name


def test_unloadable_encoder_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(LocusInputError, match="could not be loaded"):
        SentenceTransformerEncoder(str(empty)).encode("x")
    with pytest.raises(LocusInputError, match="hashing-<dim>"):
        get_text_encoder("hashing-abc")


def test_encode_missing_caches_by_text(tmp_path: Path) -> None:
    rows = planted_long_table(n_queries=12)
    encoder = HashingEncoder(dim=16)
    with Store.open(tmp_path / "ws") as store:
        store.write_batch(ImportBatch.from_long(rows, source="a", origin="a.csv"), kind="table")
        first = encode_missing(store, encoder, chunk_size=5)
        second = encode_missing(store, encoder)
        # identical texts under another source reuse the cached vectors
        store.write_batch(ImportBatch.from_long(rows, source="b", origin="b.csv"), kind="table")
        third = encode_missing(store, encoder)
        assert (first.encoded, second.encoded, second.cached, third.encoded) == (12, 0, 12, 0)
        assert store.text_encoder == encoder.name
        table = store.score_table(sources=["a"])
        vectors = store.get_vectors(encoder.name, list(table.text_hashes))
        expected = encoder.encode([t or "" for t in table.query_texts])
        np.testing.assert_allclose(vectors, expected, atol=1e-6)
        with pytest.raises(LocusNotFoundError, match="run `locus encode`"):
            store.get_vectors("some-other-encoder", list(table.text_hashes))


def test_head_and_tail_tell_few_shot_prompts_apart() -> None:
    """Prompts that share 300 tokens of examples and differ in their question at the end: one
    vector when cut after 256 tokens, distinct ones with the tail kept; short texts are the
    same either way."""
    examples = " ".join(f"Question {i}: what is {i} plus {i}? Answer: {2 * i}." for i in range(40))
    prompts = [f"{examples} Question: {q} Answer:" for q in ("Who wrote Hamlet?", "What is DNA?")]
    head = OnnxEncoder(quantized=True)
    both = OnnxEncoder(quantized=True, truncation="head+tail")
    assert head.name != both.name
    cut = head.encode(prompts)
    np.testing.assert_allclose(cut[0], cut[1], atol=1e-6)
    kept = both.encode(prompts)
    assert float(kept[0] @ kept[1]) < 0.99
    short = ["What is the capital of France?", "Integrate x^2 dx."]
    np.testing.assert_array_equal(head.encode(short), both.encode(short))
    assert len(both._token_ids(prompts)[0]) == 256
    with pytest.raises(LocusInputError, match="truncation"):
        OnnxEncoder(truncation="middle")
