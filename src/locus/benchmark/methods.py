"""The methods a benchmark compares, fitted on one `Fold` each, cached on disk.

A `Fold` is everything a fit may read: the score table with only the evidence cells kept
(NaN elsewhere), the query vectors, the training and validation rows, the seed. Every method,
LOCUS and the baselines alike, is fitted on the same fold, so a comparison is like for like.

Fitted routers are cached under `cache_dir/<method>/<key>/`, the key a hash of the fold (its
evidence cells, rows, vectors' encoder, seed), the method's settings and locus's own code
(`code_digest`): re-running a suite, or adding a method, refits only what changed, and a fit
cached by other code is refitted (a kNN router fitted before its task reader once came back
from the cache, and the suite measured the old router).
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from locus._progress import ProgressFactory, no_progress
from locus.data.table import ScoreTable
from locus.errors import LocusInputError
from locus.ray_cluster import RaySession
from locus.routing import Evidence, Router, load_router, make_baseline
from locus.routing.evidence import ROUTER_FILE

__all__ = [
    "COMBINED",
    "METHODS",
    "SLOW_METHODS",
    "Fold",
    "cache_key",
    "cached",
    "code_digest",
    "fit_in_parallel",
    "fit_method",
]

T = TypeVar("T")

# name -> what it is; "locus" is the LOCUS router, the rest are `locus.routing` baselines
METHODS = {
    "locus": "LOCUS: attention encoder over each LLM's evidence + correctness predictor",
    "locus+knn": "the router `locus fit` keeps: LOCUS stacked with kNN votes, and the guard",
    "knn": "per LLM, mean score of the k nearest training queries (k on validation)",
    "cluster": "k-means on query vectors, best LLM per cluster (k on validation)",
    "mf": "EmbedLLM-style matrix factorisation",
    "irt": "IRT-style: sigmoid(a(q) . theta - b(q))",
    "per-task": "best LLM per task (the query's true task)",
    "best-single": "best LLM on average",
    "random": "a random LLM",
}


@functools.cache
def code_digest() -> str:
    """A hash of the source of the installed `locus` package, every `.py` file by its path and
    bytes: a cached fit is read back only by the code that made it."""
    import locus

    root = Path(locus.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Fold:
    """One fit's inputs.

    Attributes:
        table: (n_queries, n_llms) scores; training rows hold only the evidence cells.
        vectors: (n_queries, dq) query vectors of `encoder`.
        train_rows, val_rows: row indices.
        encoder: the text encoder's name.
        seed: training seed.
        label: what the fold is, for humans ("seed 0, 128 scores per LLM").
    """

    table: ScoreTable
    vectors: NDArray[np.float32]
    train_rows: NDArray[np.int64]
    val_rows: NDArray[np.int64]
    encoder: str
    seed: int
    label: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)

    def evidence(self, split: str) -> Evidence:
        rows = self.train_rows if split == "train" else self.val_rows
        return Evidence.from_table(self.table, self.vectors, rows)

    def key(self, method: str, settings: Mapping[str, Any]) -> str:
        digest = hashlib.sha256()
        head = [method, dict(settings), self.encoder, self.seed, code_digest()]
        digest.update(json.dumps(head).encode())
        digest.update(json.dumps(list(self.table.llm_ids)).encode())
        digest.update(json.dumps(list(self.table.text_hashes)).encode())
        for rows in (self.train_rows, self.val_rows):
            digest.update(np.ascontiguousarray(rows, dtype=np.int64).tobytes())
        train = self.table.scores[self.train_rows]
        digest.update(np.packbits(~np.isnan(train)).tobytes())
        digest.update(np.nan_to_num(train, nan=-1.0).astype(np.float32).tobytes())
        return digest.hexdigest()[:20]


def _fit_locus(fold: Fold, settings: Mapping[str, Any]) -> Router:
    from locus.locus import Locus
    from locus.nn import TrainingConfig
    from locus.routing import LocusRouter

    config = TrainingConfig.from_dict({**TrainingConfig().to_dict(), **settings, "seed": fold.seed})
    model = Locus(config).fit(
        fold.table,
        fold.vectors,
        fold.train_rows,
        fold.val_rows,
        text_encoder_name=fold.encoder,
    )
    return LocusRouter(model)


def _calibrate_as_fit_does(model: Any, fold: Fold) -> None:
    """A LOCUS fit cached before `Locus.fit` kept reference queries and calibrated: both
    done now exactly as the fit does them, so old and new cache entries agree."""
    from locus.calibration import reference_rows

    if model.reference_queries_ is not None and model.manifest.calibration is not None:
        return
    model.set_reference_queries(fold.vectors[reference_rows(fold.train_rows, fold.seed)])
    model.calibrate(fold.vectors[fold.val_rows], fold.table.scores[fold.val_rows])


def _load(folder: Path) -> Router:
    if (folder / ROUTER_FILE).exists():
        return load_router(folder)
    from locus.locus import Locus
    from locus.routing import LocusRouter

    return LocusRouter(Locus.load(folder, workspace=None))


def _merged(
    method: str, settings: Mapping[str, Any] | None, locus_settings: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The settings a fit is made (and cached) with: LOCUS adds `locus_settings`."""
    merged = dict(settings or {})
    if method == "locus":
        merged.update(locus_settings or {})
    return merged


def fit_method(
    method: str,
    fold: Fold,
    *,
    settings: Mapping[str, Any] | None = None,
    locus_settings: Mapping[str, Any] | None = None,
    cache_dir: Path | None = None,
) -> tuple[Router, bool]:
    """(fitted router, True if it came from the cache) for `method` on `fold`.

    `settings` go to the router's constructor (baselines) or override `TrainingConfig` fields
    (locus); `locus_settings` are added to them for LOCUS only, so a suite can pass one set of
    options for every method. An unreadable cache entry is refitted.
    """
    if method not in METHODS:
        raise LocusInputError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if method in COMBINED:
        raise LocusInputError(
            f"{method!r} combines fitted methods ({', '.join(COMBINED[method])}); fit those"
        )
    settings = _merged(method, settings, locus_settings)
    folder = None if cache_dir is None else cache_dir / method / fold.key(method, settings)

    def load(path: Path) -> Router:
        router = _load(path)
        if method == "locus":
            _calibrate_as_fit_does(router.model, fold)  # type: ignore[attr-defined]
        return router

    def fit() -> Router:
        if method == "locus":
            return _fit_locus(fold, settings)
        if method in ("random", "cluster"):
            settings.setdefault("seed", fold.seed)
        if method in ("mf", "irt"):
            from locus.nn.factor_models import LearnedBaselineConfig

            settings["config"] = LearnedBaselineConfig(
                **{"seed": fold.seed, **settings.pop("config", {})}
            )
        return make_baseline(method, **settings).fit(fold.evidence("train"), fold.evidence("val"))

    return cached(folder, load, fit, lambda router, path: router.save(path))


def cached(
    folder: Path | None,
    load: Callable[[Path], T],
    fit: Callable[[], T],
    save: Callable[[T, Path], object],
) -> tuple[T, bool]:
    """(what `load` reads from `folder`, True), or, where none is cached there or it cannot be
    read, (what `fit` gives, False), saved into `folder` whole (written beside it, then moved
    in: a save cut short leaves nothing). `folder` None: no cache."""
    if folder is not None and folder.exists():
        try:
            return load(folder), True
        except Exception:
            shutil.rmtree(folder, ignore_errors=True)
    value = fit()
    if folder is not None:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".fit-", dir=folder.parent))
        try:
            save(value, staging / "fitted")
            (staging / "fitted").replace(folder)
        except OSError:
            if not folder.exists():
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return value, False


# methods made of other methods' fits, combined on validation (nothing of their own to fit):
# locus+knn is the StackedRouter `locus fit` keeps
COMBINED = {"locus+knn": ("locus", "knn")}
# the fits worth a process of their own; the others take well under a second
SLOW_METHODS = ("locus", "mf", "irt", "cluster")


def _one_thread() -> None:
    """A worker process's initialiser: one thread each, so `workers` processes share the
    cores instead of fighting over them."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)


def cache_key(method: str, fold: Fold, locus_settings: Mapping[str, Any] | None = None) -> str:
    """`<method>/<key>`: where `fit_method(method, fold, locus_settings=...)` caches its fit
    under the cache folder."""
    return f"{method}/{fold.key(method, _merged(method, None, locus_settings))}"


def _fit_into_cache(
    method: str, fold: Fold, locus_settings: Mapping[str, Any], cache_dir: Path
) -> float:
    started = time.perf_counter()
    fit_method(method, fold, locus_settings=locus_settings, cache_dir=cache_dir)
    return time.perf_counter() - started


def _fit_to_files(
    method: str, fold: Fold, locus_settings: Mapping[str, Any]
) -> tuple[float, dict[str, bytes]]:
    """A Ray task: the fit, saved in a scratch folder and sent back as {relative path: bytes}
    (no disk shared with the caller needed), with the seconds it took. One thread, as the
    process workers have (`_one_thread`)."""
    _one_thread()
    with tempfile.TemporaryDirectory(prefix="locus-fit-") as scratch:
        seconds = _fit_into_cache(method, fold, locus_settings, Path(scratch))
        folder = Path(scratch) / cache_key(method, fold, locus_settings)
        files = {
            str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        }
    return seconds, files


def _unpack(files: Mapping[str, bytes], folder: Path) -> None:
    """Write a fit sent back by `_fit_to_files` into `folder`, whole or not at all."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".fit-", dir=folder.parent))
    try:
        for name, data in files.items():
            target = staging / "router" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if not folder.exists():
            (staging / "router").replace(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fit_on_ray(
    todo: Mapping[str, tuple[str, Fold, dict[str, Any]]],
    cache_dir: Path,
    progress: ProgressFactory,
    description: str,
) -> dict[str, float]:
    """Each fit of `todo` as a Ray task of one CPU; every fold put in the object store once."""
    from locus.ray_cluster import import_ray

    ray = import_ray()
    task: Any = ray.remote(num_cpus=1, max_retries=1)(_fit_to_files)
    folds: dict[int, Any] = {}
    pending: dict[Any, str] = {}
    for key, (method, fold, settings) in todo.items():
        if id(fold) not in folds:
            folds[id(fold)] = ray.put(fold)
        pending[task.remote(method, folds[id(fold)], settings)] = key
    seconds: dict[str, float] = {}
    with progress(description, total=len(todo)) as step:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            key = pending.pop(done[0])
            try:
                seconds[key], files = ray.get(done[0])
            except ray.exceptions.RayError:
                for ref in pending:
                    ray.cancel(ref)
                raise
            _unpack(files, cache_dir / key)
            step(1)
    return seconds


def fit_in_parallel(
    jobs: Sequence[tuple[str, Fold, Mapping[str, Any]]],
    cache_dir: Path,
    *,
    workers: int,
    progress: ProgressFactory = no_progress,
    ray: RaySession | None = None,
) -> dict[str, float]:
    """Fit each (method, fold, locus_settings) of `jobs` not yet cached into `cache_dir`, on
    `workers` processes of one thread each, or as Ray tasks of one CPU each on `ray`'s cluster
    (`workers` is then unused): {cache_key: seconds the fit took}. A suite then reads every fit
    from the cache.

    Small networks on two cores train faster as two one-thread fits side by side than one
    after the other on two threads (a ZeroEval-500 suite: 75 s against 113 s; each fit 1.2x
    slower, two at once). Jobs run in the order given (put the longest first). A fit that
    fails in a worker raises here. Both ways run each fit on one thread, so they give the same
    fits, to the bit.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    todo = {}
    for method, fold, settings in jobs:
        key = cache_key(method, fold, settings)
        if key not in todo and not (cache_dir / key).exists():
            todo[key] = (method, fold, dict(settings))
    if ray is not None and todo:
        return _fit_on_ray(todo, cache_dir, progress, f"fitting on {ray.describe()}")
    if workers < 2 or len(todo) < 2:
        return {}
    context = multiprocessing.get_context("spawn")  # no forked torch or BLAS thread pools
    seconds: dict[str, float] = {}
    with (
        progress(f"fitting on {workers} processes", total=len(todo)) as step,
        ProcessPoolExecutor(workers, mp_context=context, initializer=_one_thread) as pool,
    ):
        futures = {pool.submit(_fit_into_cache, *job, cache_dir): key for key, job in todo.items()}
        for future in as_completed(futures):
            seconds[futures[future]] = future.result()
            step(1)
    return seconds
