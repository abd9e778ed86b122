"""Download public evaluation results, verified by their git blob SHA-1.

`fetch_mmlu_pro` fetches the MMLU-Pro authors' ``eval_results`` zips from GitHub at a pinned
commit: the file list and each file's git blob SHA-1 come from the GitHub contents API, each file
from the repository's raw URL. Every file is verified (git blob SHA-1 =
``sha1(b"blob <size>\\0" + content)``) before it is moved into place (temporary file + rename),
files already present with the right SHA-1 are not downloaded again, and an optional local
manifest (``models.csv`` with ``source_path, blob_sha``) pins the expected set.

The HTTP transport is injected (``opener(url) -> bytes``), so tests serve files from memory and
nothing here needs a network at import or in tests.

    folder = fetch_mmlu_pro(Path("data/mmlu_pro"), commit=default_mmlu_pro_commit())
    batch = import_mmlu_pro(folder)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from locus._progress import ProgressFactory, no_progress
from locus.data.readers import read_table
from locus.errors import LocusError, LocusInputError

__all__ = [
    "DEFAULT_MMLU_PRO_COMMIT",
    "MMLU_PRO_REPOSITORY",
    "Opener",
    "default_mmlu_pro_commit",
    "default_mmlu_pro_source",
    "fetch_mmlu_pro",
    "git_blob_sha1",
    "locate_or_fetch_mmlu_pro",
    "urllib_opener",
]

logger = logging.getLogger("locus.data.fetch")

Opener = Callable[[str], bytes]
"""``opener(url) -> bytes``: the body of a successful GET; raises `LocusError` on failure."""

MMLU_PRO_REPOSITORY = "TIGER-AI-Lab/MMLU-Pro"
MMLU_PRO_FOLDER = "eval_results"
DEFAULT_MMLU_PRO_COMMIT = "f418b116db00b065c2aea046518d8fcf74d39872"
SHARED_MMLU_PRO = ("shared", "locus-data", "mmlu_pro", "eval_results")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_TIMEOUT_S = 60.0


def git_blob_sha1(content: bytes) -> str:
    """The git blob SHA-1 of ``content`` (what ``git hash-object`` prints), 40 hex digits."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def urllib_opener(url: str, *, timeout_s: float = _TIMEOUT_S) -> bytes:
    """GET ``url`` with the standard library; a `LocusError` on any network or HTTP failure."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url, headers={"User-Agent": "locus", "Accept": "application/vnd.github+json, */*"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as exc:
        raise LocusError(
            f"{url}: HTTP {exc.code} {exc.reason}; expected the file at this address; check the "
            "commit and file name (GitHub's API allows 60 unauthenticated requests an hour)"
        ) from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LocusError(
            f"{url}: download failed ({reason}); expected a network connection to GitHub; check "
            "the connection or proxy, or copy the files by hand"
        ) from exc


def default_mmlu_pro_source(project_root: Path) -> Path | None:
    """``<project_root>/../shared/locus-data/mmlu_pro/eval_results`` if that folder exists."""
    folder = Path(project_root).resolve().parent.joinpath(*SHARED_MMLU_PRO)
    return folder if folder.is_dir() else None


def default_mmlu_pro_commit(project_root: Path | None = None) -> str:
    """The pinned MMLU-Pro commit: ``SOURCE_COMMIT`` of the shared data folder when present
    (beside ``project_root``), else `DEFAULT_MMLU_PRO_COMMIT`."""
    if project_root is not None:
        folder = default_mmlu_pro_source(project_root)
        for candidate in () if folder is None else (folder, folder.parent):
            marker = candidate / "SOURCE_COMMIT"
            if marker.is_file():
                commit = marker.read_text(encoding="utf-8").strip()
                if _COMMIT.fullmatch(commit):
                    return commit
    return DEFAULT_MMLU_PRO_COMMIT


def locate_or_fetch_mmlu_pro(
    *,
    downloads: Path,
    project_root: Path | None = None,
    opener: Opener | None = None,
    progress: ProgressFactory = no_progress,
) -> Path:
    """The MMLU-Pro ``eval_results`` folder: the shared copy when present, else downloaded.

    Looks, in order, for ``../shared/locus-data/mmlu_pro/eval_results`` beside ``project_root``
    (default: the current folder, then the source tree this module lives in); then for a
    finished earlier download in ``downloads`` (its ``SOURCE_COMMIT`` names the pinned commit,
    and is written only once every file was verified), which needs no network; else fetches the
    pinned commit into ``downloads`` with `fetch_mmlu_pro`.

    Args:
        downloads: where to download (e.g. ``<workspace>/downloads/mmlu_pro``).
        project_root: the project whose ``../shared`` to look in.
        opener: passed to `fetch_mmlu_pro`.
        progress: passed to `fetch_mmlu_pro`.
    """
    roots = (
        [Path(project_root)]
        if project_root is not None
        else [Path.cwd(), Path(__file__).resolve().parents[3]]
    )
    for root in roots:
        shared = default_mmlu_pro_source(root)
        if shared is not None:
            return shared
    commit = default_mmlu_pro_commit(roots[0])
    downloads = Path(downloads)
    marker = downloads / "SOURCE_COMMIT"
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == commit:
        return downloads
    return fetch_mmlu_pro(downloads, commit=commit, opener=opener, progress=progress)


def fetch_mmlu_pro(
    dest: Path,
    *,
    commit: str,
    opener: Opener | None = None,
    manifest: Path | None = None,
    progress: ProgressFactory = no_progress,
) -> Path:
    """Download MMLU-Pro's ``eval_results`` zips at ``commit`` into ``dest``, verified.

    Args:
        dest: the folder to fill (created if needed). Files already there with the right git
            blob SHA-1 are kept; others are replaced.
        commit: the full 40-hex commit of ``TIGER-AI-Lab/MMLU-Pro`` (see
            `default_mmlu_pro_commit`).
        opener: ``opener(url) -> bytes``; default `urllib_opener` (stdlib, with a timeout).
        manifest: optional ``models.csv`` with columns ``source_path`` (e.g.
            ``eval_results/model_outputs_X.zip``) and ``blob_sha``: then exactly the files it
            lists are fetched, and each must have the listed SHA-1 upstream and on disk.
        progress: one step per file.

    Returns:
        ``dest``, holding the zips and a ``SOURCE_COMMIT`` file naming the commit.

    Raises:
        LocusInputError: a malformed commit or manifest.
        LocusError: a network failure, an unexpected API answer, a file whose content does not
            match its SHA-1 (tampered or truncated), a manifest file missing upstream.
    """
    if not _COMMIT.fullmatch(commit):
        raise LocusInputError(
            f"commit {commit!r} is not a full git commit; expected 40 lower-case hex digits, "
            f"e.g. {DEFAULT_MMLU_PRO_COMMIT}"
        )
    get = opener if opener is not None else urllib_opener
    dest = Path(dest)
    listing = _listing(get, commit)
    wanted = listing
    if manifest is not None:
        wanted = _apply_manifest(listing, _read_manifest(Path(manifest)), Path(manifest), commit)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocusInputError(
            f"{dest}: cannot create the folder ({exc.strerror or exc}); expected a writable "
            "place for the downloads; choose another folder"
        ) from exc
    # SOURCE_COMMIT marks a finished, verified download: drop it until this one is finished
    (dest / "SOURCE_COMMIT").unlink(missing_ok=True)
    downloaded = 0
    with progress("downloading MMLU-Pro results", total=len(wanted)) as advance:
        for name, sha in sorted(wanted.items()):
            target = dest / name
            if target.is_file() and git_blob_sha1(target.read_bytes()) == sha:
                advance(1)
                continue
            url = (
                f"https://github.com/{MMLU_PRO_REPOSITORY}/raw/{commit}/{MMLU_PRO_FOLDER}/"
                f"{quote(name)}"
            )
            content = get(url)
            found = git_blob_sha1(content)
            if found != sha:
                raise LocusError(
                    f"{url}: content does not match its git blob SHA-1 (expected {sha}, found "
                    f"{found}, {len(content)} bytes); the download is damaged or was altered; "
                    "nothing was written for this file; try again"
                )
            _write_atomically(target, content)
            downloaded += 1
            advance(1)
    _write_atomically(dest / "SOURCE_COMMIT", f"{commit}\n".encode())
    logger.info(
        "%s: %d files downloaded, %d already present", dest, downloaded, len(wanted) - downloaded
    )
    return dest


def _listing(get: Opener, commit: str) -> dict[str, str]:
    """File name -> git blob SHA-1 of the ``.zip`` files in ``eval_results`` at ``commit``."""
    url = (
        f"https://api.github.com/repos/{MMLU_PRO_REPOSITORY}/contents/{MMLU_PRO_FOLDER}"
        f"?ref={commit}"
    )
    body = get(url)
    try:
        entries = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LocusError(
            f"{url}: the answer is not JSON ({exc}); expected the GitHub contents listing; try "
            "again later"
        ) from exc
    if not isinstance(entries, list):
        message = entries.get("message") if isinstance(entries, dict) else None
        raise LocusError(
            f"{url}: expected a list of files, found {message or type(entries).__name__!r}; "
            "check the commit, or wait if GitHub's rate limit was reached"
        )
    files: dict[str, str] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        name, sha, kind = entry.get("name"), entry.get("sha"), entry.get("type", "file")
        if (
            kind == "file"
            and isinstance(name, str)
            and name.lower().endswith(".zip")
            and "/" not in name
            and not name.startswith(".")
            and isinstance(sha, str)
            and re.fullmatch(r"[0-9a-f]{40}", sha)
        ):
            files[name] = sha
    if not files:
        raise LocusError(
            f"{url}: no .zip files listed; expected MMLU-Pro's eval_results zips at commit "
            f"{commit}; check the commit"
        )
    return files


def _read_manifest(path: Path) -> dict[str, str]:
    """``models.csv`` -> file name -> blob SHA-1."""
    table = read_table(path)
    for column in ("source_path", "blob_sha"):
        if column not in table.frame.columns:
            raise LocusInputError(
                f"{path}: missing column {column!r}; expected a manifest with columns "
                f"source_path, blob_sha, found {', '.join(map(str, table.frame.columns))}; "
                "pass the mmlu_pro models.csv"
            )
    out: dict[str, str] = {}
    for position, (source_path, sha) in enumerate(
        zip(table.frame["source_path"], table.frame["blob_sha"], strict=True)
    ):
        sha_text = str(sha).strip().lower()
        if not isinstance(source_path, str) or not re.fullmatch(r"[0-9a-f]{40}", sha_text):
            raise LocusInputError(
                f"{path}: {table.describe_row(position)}: expected a file path and a 40-hex "
                f"blob_sha, found {source_path!r}, {sha!r}; fix the manifest"
            )
        out[Path(source_path.strip()).name] = sha_text
    return out


def _apply_manifest(
    listing: dict[str, str], manifest: dict[str, str], path: Path, commit: str
) -> dict[str, str]:
    for name, sha in sorted(manifest.items()):
        if name not in listing:
            raise LocusError(
                f"{path}: {name} is not in {MMLU_PRO_REPOSITORY}/{MMLU_PRO_FOLDER} at {commit}; "
                "expected every manifest file upstream; check the commit or the manifest"
            )
        if listing[name] != sha:
            raise LocusError(
                f"{path}: {name} has blob SHA-1 {listing[name]} upstream at {commit} but "
                f"{sha} in the manifest; expected them to agree; check the commit or the manifest"
            )
    extra = sorted(set(listing) - set(manifest))
    if extra:
        logger.info("%s: %d upstream files not in the manifest were skipped", path, len(extra))
    return dict(manifest)


def _write_atomically(target: Path, content: bytes) -> None:
    """Write to a temporary file beside ``target``, then rename: never a half-written file."""
    temporary: Path | None = None
    try:
        with tempfile.NamedTemporaryFile(
            dir=target.parent, prefix=f".{target.name}.", suffix=".part", delete=False
        ) as handle:
            temporary = Path(handle.name)
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except OSError as exc:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise LocusError(
            f"{target}: cannot write ({exc.strerror or exc}); expected a writable folder with "
            "free space; free some space or choose another destination"
        ) from exc
    except BaseException:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise
