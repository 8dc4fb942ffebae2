"""Where the real graphs live, and how to get one that is missing.

Files are looked up in ``FOLLOWFEED_DATA_DIR`` (default ``../shared/data``), then, for a
checkout cloned from a local repository (``git clone /work/main /tmp/fresh``), in the
``../shared/data`` beside that repository. A missing file is downloaded from its publisher (SNAP) and checked against
the sha256 published in ``shared/data/README.md``; a mismatch is an error.
The data files are research data (cite SNAP); they are never committed.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

# sha256 of the .gz files, from shared/data/README.md.
KNOWN_DATASETS: dict[str, tuple[str, str]] = {
    "soc-Slashdot0902.txt.gz": (
        "https://snap.stanford.edu/data/soc-Slashdot0902.txt.gz",
        "65072f0a2d98a444967bf3b8379a87e03292f2f9f8924f4fe470ddd047c95553",
    ),
    "soc-Epinions1.txt.gz": (
        "https://snap.stanford.edu/data/soc-Epinions1.txt.gz",
        "6d48a82599c44d03c3827915b818bc55378d5b029a07301b0cb9f260599250f7",
    ),
    "wiki-Vote.txt.gz": (
        "https://snap.stanford.edu/data/wiki-Vote.txt.gz",
        "6910f0c05aacefaf4bda81b69093d81b063ec6d304e76311f970e47bdac2c320",
    ),
    "higgs-activity_time.txt.gz": (
        "https://snap.stanford.edu/data/higgs-activity_time.txt.gz",
        "901b199716a23b0fc0371705e3ae9941b5c9493277aec65456abc4988674ad79",
    ),
}


class DatasetError(RuntimeError):
    """A dataset could not be found, fetched, or failed its checksum."""


def sha256_of(path: Path) -> str:
    """Hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dataset_path(name: str | None = None) -> Path:
    """Local path of dataset ``name`` (default ``FOLLOWFEED_DATASET``), downloading it if absent.

    :raises DatasetError: unknown name with no local file, download failure,
        or a checksum that does not match.
    """
    name = name or settings.FOLLOWFEED_DATASET
    candidate = Path(name)
    if candidate.is_file():
        return candidate
    path = Path(settings.FOLLOWFEED_DATA_DIR) / name
    if path.is_file():
        return path
    origin = _clone_source()
    if origin is not None and (origin.parent / "shared" / "data" / name).is_file():
        return origin.parent / "shared" / "data" / name
    if name not in KNOWN_DATASETS:
        raise DatasetError(f"{path} does not exist and {name} is not a known dataset")
    url, expected = KNOWN_DATASETS[name]
    target = Path(settings.BASE_DIR) / "var" / "data" / name
    if target.is_file() and sha256_of(target) == expected:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, partial.open("wb") as out:  # noqa: S310 - an https URL of KNOWN_DATASETS
            shutil.copyfileobj(response, out)
    except OSError as exc:
        # Offline, the way out is a local copy: name the folder looked in and the setting that moves it.
        raise DatasetError(
            f"{name} is not in {path.parent} (FOLLOWFEED_DATA_DIR) and could not be downloaded from {url}: {exc}; "
            "set FOLLOWFEED_DATA_DIR to the folder that holds it"
        ) from exc
    actual = sha256_of(partial)
    if actual != expected:
        partial.unlink()
        raise DatasetError(f"{url}: sha256 {actual} does not match the published {expected}")
    partial.rename(target)
    return target


def _clone_source() -> Path | None:
    """The local repository this checkout (``BASE_DIR``) was cloned from: its ``origin`` remote when
    that is a directory on this machine; None otherwise (no git, no origin, a URL)."""
    try:
        found = subprocess.run(  # noqa: S603 - git on PATH, fixed argv
            ["git", "-C", str(settings.BASE_DIR), "config", "--get", "remote.origin.url"],  # noqa: S607
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    url = found.stdout.strip().removeprefix("file://")
    if found.returncode != 0 or not url or not Path(url).is_dir():
        return None
    return Path(url).resolve()


def read_edges(path: Path) -> Iterator[tuple[int, int]]:
    """Yield ``(a, b)`` for each "a b" line (a follows b) of a SNAP edge list (.gz or plain).

    ``#`` lines and blank lines are skipped; columns beyond the second are
    ignored.

    :raises DatasetError: on a line that is not two integers.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as raw:
        for number, line in enumerate(io.BufferedReader(raw), start=1):
            if not line.strip() or line.startswith(b"#"):
                continue
            parts = line.split()
            try:
                yield int(parts[0]), int(parts[1])
            except (ValueError, IndexError):
                raise DatasetError(f"{path}:{number}: not an edge: {line[:80]!r}") from None
