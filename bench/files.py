"""Atomic file writing, one definition for every file the suite writes: the data goes to a
temporary name beside the target, is flushed to disk (fsync) and renamed over the target, so a
kill at any moment leaves either the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np


@contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix, so tools that infer the format from
    it still do) for the caller to write; on success it is synced and renamed over ``path``, on
    an error removed."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        yield tmp
        _sync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _sync(path.parent)  # the rename itself


def _sync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # a directory where the system cannot open one (not Linux)
        return
    try:
        os.fsync(fd)
    except OSError:  # a directory on a file system that cannot sync one
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Replace ``path`` with ``data`` (text is written as UTF-8, line endings untouched)."""
    with replacing(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return Path(path)


def write_json_atomic(path: str | os.PathLike, obj, indent: int | None = None) -> Path:
    return write_atomic(path, json.dumps(obj, indent=indent))


def save_csv_atomic(path: str | os.PathLike, table) -> Path:
    """Replace ``path`` with the DataFrame ``table`` as CSV (no index), its folder made."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        table.to_csv(tmp, index=False)
    return Path(path)


def save_npy_atomic(path: str | os.PathLike, array: np.ndarray) -> Path:
    with replacing(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array)
    return Path(path)
