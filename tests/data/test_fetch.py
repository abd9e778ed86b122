"""fetch_mmlu_pro against a fake GitHub (an injected opener serving files from memory)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from locus.data.fetch import (
    DEFAULT_MMLU_PRO_COMMIT,
    default_mmlu_pro_commit,
    default_mmlu_pro_source,
    fetch_mmlu_pro,
    git_blob_sha1,
    locate_or_fetch_mmlu_pro,
    urllib_opener,
)
from locus.data.importers import import_mmlu_pro
from locus.errors import LocusError, LocusInputError

from .conftest import ProgressRecord, mmlu_record, write_mmlu_zip

COMMIT = "ab" * 20
LISTING_URL = (
    f"https://api.github.com/repos/TIGER-AI-Lab/MMLU-Pro/contents/eval_results?ref={COMMIT}"
)


def raw_url(name: str) -> str:
    return f"https://github.com/TIGER-AI-Lab/MMLU-Pro/raw/{COMMIT}/eval_results/{name}"


class FakeGitHub:
    """Serves a contents listing and raw files; records every URL asked for."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.shas = {name: git_blob_sha1(data) for name, data in files.items()}
        self.calls: list[str] = []

    def listing(self) -> bytes:
        entries: list[dict[str, object]] = [
            {
                "name": name,
                "path": f"eval_results/{name}",
                "sha": sha,
                "size": len(self.files[name]),
                "type": "file",
            }
            for name, sha in self.shas.items()
        ]
        entries.append(
            {"name": "README.md", "path": "eval_results/README.md", "sha": "1" * 40, "type": "file"}
        )
        entries.append({"name": "old", "path": "eval_results/old", "sha": "2" * 40, "type": "dir"})
        return json.dumps(entries).encode()

    def __call__(self, url: str) -> bytes:
        self.calls.append(url)
        if url == LISTING_URL:
            return self.listing()
        for name, data in self.files.items():
            if url == raw_url(name):
                return data
        raise LocusError(f"{url}: HTTP 404 Not Found")

    def downloads(self) -> list[str]:
        return [url for url in self.calls if url != LISTING_URL]


@pytest.fixture
def github(tmp_path: Path) -> FakeGitHub:
    build = tmp_path / "build"
    build.mkdir()
    a = write_mmlu_zip(build / "model_outputs_llm-a_5shots.zip", [mmlu_record(1, "B")])
    b = write_mmlu_zip(
        build / "model_outputs_llm-b_5shots.zip", [mmlu_record(1, "A"), mmlu_record(2, "B")]
    )
    return FakeGitHub({a.name: a.read_bytes(), b.name: b.read_bytes()})


def test_git_blob_sha1_matches_git() -> None:
    # `printf 'hello\n' | git hash-object --stdin`
    assert git_blob_sha1(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert git_blob_sha1(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def test_downloads_verifies_and_imports(
    tmp_path: Path, github: FakeGitHub, progress_record: ProgressRecord
) -> None:
    dest = tmp_path / "data" / "mmlu_pro"
    result = fetch_mmlu_pro(dest, commit=COMMIT, opener=github, progress=progress_record)
    assert result == dest
    assert sorted(github.downloads()) == sorted(raw_url(name) for name in github.files)
    for name, data in github.files.items():
        assert (dest / name).read_bytes() == data
    assert (dest / "SOURCE_COMMIT").read_text().strip() == COMMIT
    assert not list(dest.glob(".*")), "no temporary files left behind"
    assert progress_record.tasks == [("downloading MMLU-Pro results", 2)]
    assert progress_record.advanced == [2]
    batch = import_mmlu_pro(dest)
    assert batch.llms["llm_id"].tolist() == ["llm-a", "llm-b"]
    assert batch.n_scores == 3


def test_rerun_downloads_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    fetch_mmlu_pro(tmp_path, commit=COMMIT, opener=github)
    github.calls.clear()
    fetch_mmlu_pro(tmp_path, commit=COMMIT, opener=github)
    assert github.calls == [LISTING_URL]


def test_damaged_local_file_is_downloaded_again(tmp_path: Path, github: FakeGitHub) -> None:
    fetch_mmlu_pro(tmp_path, commit=COMMIT, opener=github)
    name = sorted(github.files)[0]
    (tmp_path / name).write_bytes(b"partial")
    github.calls.clear()
    fetch_mmlu_pro(tmp_path, commit=COMMIT, opener=github)
    assert github.downloads() == [raw_url(name)]
    assert (tmp_path / name).read_bytes() == github.files[name]


def test_tampered_download_is_rejected_and_not_written(tmp_path: Path, github: FakeGitHub) -> None:
    name = sorted(github.files)[1]
    github.files[name] = github.files[name][:-1] + b"X"  # the listing keeps the true SHA-1
    with pytest.raises(LocusError) as caught:
        fetch_mmlu_pro(tmp_path, commit=COMMIT, opener=github)
    message = str(caught.value)
    assert name in message and github.shas[name] in message
    assert not (tmp_path / name).exists()
    assert not list(tmp_path.glob(".*")), "no temporary files left behind"


def test_manifest_pins_the_set(tmp_path: Path, github: FakeGitHub) -> None:
    name = sorted(github.files)[0]
    manifest = tmp_path / "models.csv"
    manifest.write_text(f"model,source_path,blob_sha\nx,eval_results/{name},{github.shas[name]}\n")
    dest = tmp_path / "out"
    fetch_mmlu_pro(dest, commit=COMMIT, opener=github, manifest=manifest)
    assert sorted(p.name for p in dest.glob("*.zip")) == [name]


def test_manifest_disagreeing_with_upstream(tmp_path: Path, github: FakeGitHub) -> None:
    name = sorted(github.files)[0]
    manifest = tmp_path / "models.csv"
    manifest.write_text(f"source_path,blob_sha\neval_results/{name},{'0' * 40}\n")
    with pytest.raises(LocusError, match="in the manifest"):
        fetch_mmlu_pro(tmp_path / "out", commit=COMMIT, opener=github, manifest=manifest)
    assert github.downloads() == []


def test_manifest_file_missing_upstream(tmp_path: Path, github: FakeGitHub) -> None:
    manifest = tmp_path / "models.csv"
    manifest.write_text(f"source_path,blob_sha\neval_results/model_outputs_gone.zip,{'0' * 40}\n")
    with pytest.raises(LocusError, match=r"model_outputs_gone\.zip is not in"):
        fetch_mmlu_pro(tmp_path / "out", commit=COMMIT, opener=github, manifest=manifest)


def test_malformed_manifest(tmp_path: Path, github: FakeGitHub) -> None:
    manifest = tmp_path / "models.csv"
    manifest.write_text("source_path,sha\nx.zip,abc\n")
    with pytest.raises(LocusInputError, match="missing column 'blob_sha'"):
        fetch_mmlu_pro(tmp_path / "out", commit=COMMIT, opener=github, manifest=manifest)
    manifest.write_text("source_path,blob_sha\nx.zip,abc\n")
    with pytest.raises(LocusInputError, match="line 2"):
        fetch_mmlu_pro(tmp_path / "out", commit=COMMIT, opener=github, manifest=manifest)


@pytest.mark.parametrize("commit", ["main", "AB" * 20, "ab" * 19])
def test_commit_must_be_a_full_hash(tmp_path: Path, github: FakeGitHub, commit: str) -> None:
    with pytest.raises(LocusInputError, match="40 lower-case hex"):
        fetch_mmlu_pro(tmp_path, commit=commit, opener=github)
    assert github.calls == []


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"<html>rate limited</html>", "not JSON"),
        (b'{"message": "API rate limit exceeded"}', "API rate limit exceeded"),
        (b"[]", "no .zip files listed"),
    ],
)
def test_unexpected_listing(tmp_path: Path, body: bytes, match: str) -> None:
    opener: Callable[[str], bytes] = lambda url: body  # noqa: E731
    with pytest.raises(LocusError, match=match):
        fetch_mmlu_pro(tmp_path, commit=COMMIT, opener=opener)


def test_default_opener_reports_network_failure() -> None:
    # port 9 (discard) on this machine refuses the connection at once; no internet needed
    with pytest.raises(LocusError, match="download failed"):
        urllib_opener("http://127.0.0.1:9/eval_results", timeout_s=5)


def test_default_source_and_commit(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    assert default_mmlu_pro_source(root) is None
    assert default_mmlu_pro_commit(root) == DEFAULT_MMLU_PRO_COMMIT
    assert default_mmlu_pro_commit() == DEFAULT_MMLU_PRO_COMMIT
    shared = tmp_path / "shared" / "locus-data" / "mmlu_pro" / "eval_results"
    shared.mkdir(parents=True)
    assert default_mmlu_pro_source(root) == shared.resolve()
    (shared / "SOURCE_COMMIT").write_text("not a commit\n")
    assert default_mmlu_pro_commit(root) == DEFAULT_MMLU_PRO_COMMIT
    (shared / "SOURCE_COMMIT").write_text(f"{COMMIT}\n")
    assert default_mmlu_pro_commit(root) == COMMIT


def test_shared_commit_is_the_pinned_default(real_data: Path) -> None:
    marker = real_data / "mmlu_pro" / "eval_results" / "SOURCE_COMMIT"
    assert marker.read_text().strip() == DEFAULT_MMLU_PRO_COMMIT


def test_locate_prefers_the_shared_copy(tmp_path: Path, github: FakeGitHub) -> None:
    root = tmp_path / "project"
    root.mkdir()
    shared = tmp_path / "shared" / "locus-data" / "mmlu_pro" / "eval_results"
    shared.mkdir(parents=True)
    found = locate_or_fetch_mmlu_pro(downloads=tmp_path / "dl", project_root=root, opener=github)
    assert found == shared.resolve()
    assert github.calls == []


def test_locate_fetches_once_then_works_offline(
    tmp_path: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.setattr("locus.data.fetch.DEFAULT_MMLU_PRO_COMMIT", COMMIT)
    downloads = tmp_path / "ws" / "downloads" / "mmlu_pro"
    first = locate_or_fetch_mmlu_pro(downloads=downloads, project_root=root, opener=github)
    assert first == downloads
    assert len(github.downloads()) == 2

    def offline(url: str) -> bytes:
        raise LocusError(f"{url}: download failed (offline)")

    assert locate_or_fetch_mmlu_pro(downloads=downloads, project_root=root, opener=offline) == (
        downloads
    )


def test_interrupted_fetch_is_not_mistaken_for_a_finished_one(
    tmp_path: Path, github: FakeGitHub
) -> None:
    fetch_mmlu_pro(tmp_path, commit=COMMIT, opener=github)
    name = sorted(github.files)[1]
    (tmp_path / name).write_bytes(b"stale")
    github.files[name] = b"tampered"
    with pytest.raises(LocusError):
        fetch_mmlu_pro(tmp_path, commit=COMMIT, opener=github)
    assert not (tmp_path / "SOURCE_COMMIT").exists()
