"""Resumable, checksummed downloads of the real datasets (urllib only) and their unpacking.

Follows docs/architecture.md, Datasets (checksum, retries, resumable).

Algorithm of :func:`download`:

1. ``dest`` already present (and matching ``sha256`` when one is given): done.
2. Otherwise bytes go to ``dest + ".part"``. Each attempt asks for
   ``Range: bytes=<size of .part>-``; a ``206`` answer is appended, a ``200`` answer
   (server ignores ranges) restarts the file. An answer shorter than its
   ``Content-Length`` counts as a failed attempt, its bytes are kept for the next one.
3. Failed attempts (connection errors, timeouts, 5xx, 408, 429, short bodies) are retried
   up to ``retries`` times after ``backoff * 2**k`` seconds; other 4xx fail at once.
4. The complete ``.part`` is hashed; a mismatch deletes it and raises
   :class:`CorruptFileError`. Only then is it renamed onto ``dest`` (atomic on POSIX),
   so ``dest`` never exists half-written.

The source table lists where each real dataset comes from. The GraphSAINT Google-Drive
files (yelp, amazon-products) cannot be fetched by a script, so they are marked manual
and the error says where to put them. No checksums are published for these archives,
so the table carries none (``sha256=None``); the size check in step 2 still catches
truncation, and the readers in :mod:`cdfgnn.data.real` validate the content.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from cdfgnn.errors import CdfgnnError, CorruptFileError
from cdfgnn.progress import progress

USER_AGENT = "cdfgnn-downloader/0.1"
#: set to 1 to make every download fail at once (offline machines, CI)
OFFLINE_ENV = "CDFGNN_OFFLINE"


class DownloadError(CdfgnnError):
    """A file could not be fetched (network down, HTTP error, retries exhausted)."""


@dataclass(frozen=True)
class Source:
    """Where a real dataset's raw files come from and how they are laid out after unpacking."""

    url: str | None                  # None: manual download only
    archive: str                     # file name the download is saved as
    kind: str                        # "zip" (extracted) or "file" (kept as is)
    files: tuple[str, ...]           # files the reader needs, relative to the raw dir
    subdir: str | None = None        # zip folder that becomes the dataset dir (OGB layout)
    sha256: str | None = None
    note: str = ""


_DGL = "https://data.dgl.ai/dataset/"
_OGB = "https://snap.stanford.edu/ogb/data/nodeproppred/"
_SAINT_FILES = ("adj_full.npz", "feats.npy", "class_map.json", "role.json")
_SAINT_NOTE = ("the GraphSAINT release is a Google Drive folder "
               "(https://drive.google.com/drive/folders/1zycmmDES39zVlbVCYs88JTJ1Wm5FbfLz) that "
               "cannot be fetched by a script: download {files} by hand")

SOURCES: dict[str, Source] = {
    "reddit": Source(_DGL + "reddit.zip", "reddit.zip", "zip",
                     ("reddit_data.npz", "reddit_graph.npz")),
    "flickr": Source(_DGL + "flickr.zip", "flickr.zip", "zip", _SAINT_FILES,
                     note="DGL's mirror of the GraphSAINT Flickr files"),
    "yelp": Source(None, "", "manual", _SAINT_FILES, note=_SAINT_NOTE),
    "amazon-products": Source(None, "", "manual", _SAINT_FILES, note=_SAINT_NOTE),
    "ogbn-arxiv": Source(_OGB + "arxiv.zip", "arxiv.zip", "zip",
                         ("raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz"),
                         subdir="arxiv"),
    "ogbn-products": Source(_OGB + "products.zip", "products.zip", "zip",
                            ("raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz"),
                            subdir="products"),
    "ogbn-papers100M": Source(_OGB + "papers100M-bin.zip", "papers100M-bin.zip", "zip",
                              ("raw/data.npz", "raw/node-label.npz"), subdir="papers100M-bin",
                              note="about 57 GB compressed"),
    "friendster": Source("https://snap.stanford.edu/data/bigdata/communities/"
                         "com-friendster.ungraph.txt.gz", "com-friendster.ungraph.txt.gz",
                         "file", ("com-friendster.ungraph.txt.gz",)),
}


# ------------------------------------------------------------------------------ download
def sha256_of(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _is_offline() -> bool:
    return os.environ.get(OFFLINE_ENV, "").strip() not in ("", "0", "false", "no")


def download(url: str, dest: str | os.PathLike, sha256: str | None = None, retries: int = 3,
             timeout: float = 30.0, *, backoff: float = 1.0, chunk_size: int = 1 << 20) -> Path:
    """Fetch ``url`` to ``dest`` with resume, retries and an optional SHA-256 check."""
    dest = Path(dest)
    if _is_offline():
        raise DownloadError(f"{url}: downloads are disabled ({OFFLINE_ENV} is set)")
    if retries < 0:
        raise CdfgnnError(f"retries must be >= 0, got {retries}")
    want = sha256.lower() if sha256 else None
    if dest.is_file() and (want is None or sha256_of(dest) == want):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    last: BaseException | None = None
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        try:
            if _attempt(url, part, timeout, chunk_size):
                break
            last = DownloadError(f"{url}: connection closed before the announced length")
        except _Permanent as exc:
            raise DownloadError(f"{url}: {exc}") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            last = exc  # HTTPError (5xx, 408, 429) is a URLError: retried too
    else:
        raise DownloadError(f"{url}: failed after {retries + 1} attempt(s): {last}")
    if want is not None:
        got = sha256_of(part)
        if got != want:
            part.unlink(missing_ok=True)
            raise CorruptFileError(f"{dest}: sha256 mismatch for {url}: expected {want}, got {got}"
                                   " (partial file deleted)")
    os.replace(part, dest)
    return dest


class _Permanent(Exception):
    """An HTTP answer that retrying cannot change (404, 403, ...)."""


def _attempt(url: str, part: Path, timeout: float, chunk_size: int) -> bool:
    """One request; True when ``part`` now holds the whole body."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    req = urllib.request.Request(url, headers=headers)
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:
            # asked past the end: complete if the server's total equals what we hold
            total = _total_from_content_range(exc.headers.get("Content-Range"))
            if total == offset:
                return True
            part.unlink(missing_ok=True)
            raise
        if 400 <= exc.code < 500 and exc.code not in (408, 429):
            raise _Permanent(f"HTTP {exc.code} {exc.reason}") from None
        raise
    with resp:
        status = getattr(resp, "status", 200)
        length = resp.headers.get("Content-Length")
        if offset and status == 206:
            start = _start_from_content_range(resp.headers.get("Content-Range"))
            if start is not None and start != offset:
                part.unlink(missing_ok=True)  # server resumed somewhere else: start over
                return False
            mode, expected = "ab", (offset + int(length)) if length else None
        else:
            mode, expected = "wb", int(length) if length else None
        with open(part, mode) as f, progress(total=expected, desc=part.name, unit="B",
                                             unit_scale=True) as bar:
            bar.update(offset if mode == "ab" else 0)
            while True:
                block = resp.read(chunk_size)
                if not block:
                    break
                f.write(block)
                bar.update(len(block))
    size = part.stat().st_size
    return expected is None or size >= expected


def _total_from_content_range(value: str | None) -> int | None:
    # "bytes */1234" or "bytes 0-99/1234"
    if not value or "/" not in value:
        return None
    tail = value.rsplit("/", 1)[1].strip()
    return int(tail) if tail.isdigit() else None


def _start_from_content_range(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


# ------------------------------------------------------------------------------- unpack
def extract_zip(archive: str | os.PathLike, dest_dir: str | os.PathLike) -> Path:
    """Unpack ``archive`` into ``dest_dir`` (created); members escaping it are refused."""
    archive, dest_dir = Path(archive), Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    root = dest_dir.resolve()
    try:
        with zipfile.ZipFile(archive) as z:
            for member in z.namelist():
                target = (root / member).resolve()
                if target != root and root not in target.parents:
                    raise CorruptFileError(f"{archive}: member {member!r} would be written outside "
                                           f"{dest_dir}")
            bad = z.testzip()
            if bad is not None:
                raise CorruptFileError(f"{archive}: member {bad!r} fails its CRC check")
            z.extractall(root)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise CorruptFileError(f"{archive}: not a readable zip archive ({exc})") from None
    return dest_dir


def raw_dir_for(name: str, dataset_dir: str | os.PathLike) -> Path:
    """Where the reader of ``name`` finds its files: OGB keeps its own ``raw/`` + ``split/``."""
    src = SOURCES[name]
    return Path(dataset_dir) if src.subdir else Path(dataset_dir) / "raw"


def missing_files(name: str, dataset_dir: str | os.PathLike) -> list[str]:
    raw = raw_dir_for(name, dataset_dir)
    return [f for f in SOURCES[name].files if not (raw / f).is_file()]


def fetch_dataset(name: str, dataset_dir: str | os.PathLike, **download_kw) -> Path:
    """Download and unpack the raw files of ``name`` into ``dataset_dir``; returns the raw dir.

    Raises :class:`DownloadError` (network), :class:`CorruptFileError` (checksum, bad
    archive, archive lacking the expected files) or :class:`DownloadError` for datasets
    that must be fetched by hand.
    """
    if name not in SOURCES:
        raise CdfgnnError(f"no download source for {name!r}; known: {', '.join(sorted(SOURCES))}")
    src = SOURCES[name]
    dataset_dir = Path(dataset_dir)
    raw = raw_dir_for(name, dataset_dir)
    if src.url is None:
        raise DownloadError(f"{name}: " + src.note.format(files=", ".join(src.files))
                            + f" into {raw}")
    archive = dataset_dir / src.archive
    # module-level lookup so tests (and users) can substitute the transport
    download(src.url, archive, src.sha256, **download_kw)
    if src.kind == "file":
        raw.mkdir(parents=True, exist_ok=True)
        os.replace(archive, raw / src.archive)
    else:
        with tempfile.TemporaryDirectory(dir=dataset_dir, prefix=".unpack-") as tmp:
            try:
                extract_zip(archive, tmp)
                top = Path(tmp) / src.subdir if src.subdir else _folder_holding(Path(tmp), src.files[0])
                if top is None or not top.is_dir():
                    raise CorruptFileError(f"{archive}: does not contain {src.subdir or src.files[0]}")
            except CorruptFileError:
                archive.unlink(missing_ok=True)  # else the next call would reuse the bad archive
                raise
            raw.mkdir(parents=True, exist_ok=True)
            for item in top.iterdir():
                target = raw / item.name
                if target.is_dir():
                    shutil.rmtree(target)
                os.replace(item, target)
        archive.unlink()
    lacking = missing_files(name, dataset_dir)
    if lacking:
        raise CorruptFileError(f"{archive}: unpacked, but {lacking} are missing under {raw}")
    return raw


def _folder_holding(root: Path, filename: str) -> Path | None:
    for p in sorted(root.rglob(filename)):
        return p.parent
    return None
