"""Real scans for OCR tests, taken from the OCRmyPDF source distribution at test-setup time.

The files are not committed to this repository: :func:`real_scan_paths`
downloads the ``ocrmypdf`` sdist from PyPI once with pip, checks its SHA-256,
extracts the few files below into a cache directory and returns their paths.
Later calls only check the cache.

Files, what they are, and their licences (from the sdist's ``REUSE.toml``;
see also ``tests/data/REAL_SCANS.md``):

* ``linn.png`` — 300 dpi scan of a 1985 LinnSequencer brochure page, two
  columns; ``linn.txt`` is its reference text. (C) 1985 Forat Electronics,
  ``GFDL-1.2-or-later OR CC-BY-SA-3.0``.
* ``skew.pdf`` — ``linn.png`` in an image-only PDF with simulated skew. Same
  copyright and licence as ``linn.png``.
* ``c03-29.pdf`` — image-only PDF of page 29 of *Adventures of Huckleberry
  Finn* (Project Gutenberg scan, illustrations and old type). Public domain.
* ``typewriter.png`` — typewritten Dutch recipe ("Linzensoep a la Waterman")
  from Wikimedia Commons. (C) 2005 Ellywa, ``GFDL-1.2-or-later OR
  CC-BY-SA-1.0 OR CC-BY-SA-2.0 OR CC-BY-SA-2.5 OR CC-BY-SA-3.0``.
* ``acroform.pdf`` — a one-line PDF with an AcroForm and no page text layer.
  (C) 2025 James R. Barlow, ``CC-BY-SA-4.0``.

They are used only as test inputs and are never redistributed by this
project. OCRmyPDF's code itself is AGPL-3.0 and is neither installed nor
imported: pip only downloads the sdist archive.

The cache directory is ``$OVERSEER_REAL_SCANS_DIR`` if set, else
``<repo>/.overseer/cache/ocrmypdf/`` (ignored by git).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "OCRMYPDF_SDIST_SHA256",
    "OCRMYPDF_VERSION",
    "REAL_SCANS",
    "RealScan",
    "RealScansUnavailableError",
    "default_cache_dir",
    "real_scan_paths",
]

OCRMYPDF_VERSION = "17.13.0"
"""The sdist version; it ships ``tests/resources`` with a ``REUSE.toml``."""

OCRMYPDF_SDIST_SHA256 = "151c35d810eb628fbc5cb9bbe80b834ecf094737efa0e7a2e9e1fac3c730ed49"


@dataclass(frozen=True)
class RealScan:
    """One file taken from the OCRmyPDF sdist.

    Attributes:
        name: file name, the key of :data:`REAL_SCANS` and of :func:`real_scan_paths`.
        licence: SPDX licence expression from the sdist's ``REUSE.toml``.
        copyright: copyright holder as stated there.
        description: what the file shows, for choosing a test input.
    """

    name: str
    licence: str
    copyright: str
    description: str


_LINN_LICENCE = "GFDL-1.2-or-later OR CC-BY-SA-3.0"

REAL_SCANS: dict[str, RealScan] = {
    s.name: s
    for s in (
        RealScan(
            "linn.png",
            _LINN_LICENCE,
            "(C) 1985 Forat Electronics",
            "2550x3300 palette PNG, 300 dpi scan of a two-column product brochure page",
        ),
        RealScan(
            "linn.txt",
            _LINN_LICENCE,
            "(C) 1985 Forat Electronics",
            "reference text of linn.png (as OCRmyPDF's tests expect it)",
        ),
        RealScan(
            "skew.pdf",
            _LINN_LICENCE,
            "(C) 1985 Forat Electronics",
            "image-only US-letter PDF of linn.png with simulated skew",
        ),
        RealScan(
            "c03-29.pdf",
            "public-domain",
            "Public domain",
            "image-only PDF of a Huckleberry Finn page: old type and an illustration",
        ),
        RealScan(
            "typewriter.png",
            "GFDL-1.2-or-later OR CC-BY-SA-1.0 OR CC-BY-SA-2.0 OR CC-BY-SA-2.5 OR CC-BY-SA-3.0",
            "(C) 2005 Ellywa",
            "4000x2864 palette PNG of a typewritten Dutch recipe",
        ),
        RealScan(
            "acroform.pdf",
            "CC-BY-SA-4.0",
            "(C) 2025 James R. Barlow",
            "400x72 pt PDF with an AcroForm; text only in the form appearance, no text layer",
        ),
    )
}
"""The files :func:`real_scan_paths` provides, with their licences."""

_SDIST_PREFIX = f"ocrmypdf-{OCRMYPDF_VERSION}/tests/resources/"
_MANIFEST = "MANIFEST.json"


class RealScansUnavailableError(RuntimeError):
    """The OCRmyPDF sdist could not be downloaded, verified or unpacked."""


def default_cache_dir() -> Path:
    """Where the scans are cached: ``$OVERSEER_REAL_SCANS_DIR`` or ``.overseer/cache/ocrmypdf``."""
    override = os.environ.get("OVERSEER_REAL_SCANS_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1] / ".overseer" / "cache" / "ocrmypdf"


def real_scan_paths(cache_dir: Path | None = None) -> dict[str, Path]:
    """Return local paths of the real scans, downloading the OCRmyPDF sdist on first use.

    Safe to call from several processes at once (a file lock serialises the
    download). Needs network access to PyPI only on the first call.

    Args:
        cache_dir: where to keep the files; :func:`default_cache_dir` if None.

    Returns:
        File name (every key of :data:`REAL_SCANS`) -> absolute path of the file.

    Raises:
        RealScansUnavailableError: pip is missing, the download failed, the
            archive's checksum is wrong, or it lacks one of the files.
    """
    cache = (cache_dir or default_cache_dir()).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _cache_is_complete(cache):
            _fill_cache(cache)
    return {name: cache / name for name in REAL_SCANS}


def _cache_is_complete(cache: Path) -> bool:
    try:
        manifest = json.loads((cache / _MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("version") == OCRMYPDF_VERSION and all(
        (cache / name).is_file() and _sha256((cache / name).read_bytes()) == manifest["files"].get(name)
        for name in REAL_SCANS
    )


def _fill_cache(cache: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="ocrmypdf-sdist-") as tmp:
        sdist = _download_sdist(Path(tmp))
        digest = _sha256(sdist.read_bytes())
        if digest != OCRMYPDF_SDIST_SHA256:
            raise RealScansUnavailableError(
                f"{sdist.name} has SHA-256 {digest}, expected {OCRMYPDF_SDIST_SHA256}"
            )
        files: dict[str, str] = {}
        with tarfile.open(sdist, "r:gz") as archive:
            for name in REAL_SCANS:
                # Read members by exact name and write them ourselves: never
                # extractall an archive into the cache.
                try:
                    member = archive.extractfile(_SDIST_PREFIX + name)
                except KeyError:
                    member = None
                if member is None:
                    raise RealScansUnavailableError(f"{sdist.name} has no {_SDIST_PREFIX}{name}")
                data = member.read()
                partial = cache / f".{name}.part"
                partial.write_bytes(data)
                partial.replace(cache / name)
                files[name] = _sha256(data)
    manifest = {"version": OCRMYPDF_VERSION, "sdist_sha256": OCRMYPDF_SDIST_SHA256, "files": files}
    (cache / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def _download_sdist(dest: Path) -> Path:
    """``pip download`` the ocrmypdf sdist (source only, no dependencies) into ``dest``.

    ``--no-binary ocrmypdf`` rather than ``:all:``: pip still prepares the
    sdist's metadata, and letting its build backend (hatchling) come as a
    wheel takes seconds instead of building it from source.
    """
    args = [
        "download",
        "--no-deps",
        "--no-binary",
        "ocrmypdf",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(dest),
        f"ocrmypdf=={OCRMYPDF_VERSION}",
    ]
    failures = []
    for pip in _pip_commands():
        try:
            proc = subprocess.run([*pip, *args], capture_output=True, text=True, timeout=600, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            failures.append(f"{' '.join(pip)}: {exc}")
            continue
        if proc.returncode == 0:
            found = sorted(dest.glob(f"ocrmypdf-{OCRMYPDF_VERSION}.tar.gz"))
            if found:
                return found[0]
            failures.append(f"{' '.join(pip)}: succeeded but wrote no sdist")
        else:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            failures.append(f"{' '.join(pip)} exited {proc.returncode}: {' | '.join(tail)}")
            if "No module named pip" not in proc.stderr:
                break  # pip ran and failed: another pip would fail the same way
    raise RealScansUnavailableError(
        f"could not download the ocrmypdf=={OCRMYPDF_VERSION} sdist from PyPI "
        f"(needed for the real-scan tests): {'; '.join(failures) or 'no pip found'}"
    )


def _pip_commands() -> list[list[str]]:
    commands = [[sys.executable, "-m", "pip"]]
    for name in ("pip3", "pip"):
        found = shutil.which(name)
        if found:
            commands.append([found])
    return commands


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


if __name__ == "__main__":
    for key, path in real_scan_paths().items():
        sys.stdout.write(f"{key:16} {path.stat().st_size:>9} bytes  {REAL_SCANS[key].licence}\n")
