"""Writing output files: atomically, never over an existing file.

Every file writer of ``acres_lidar_ros.outputs`` goes through ``atomic_write``: the bytes go to a
temporary file in the target's directory, are flushed to disk, and only then appear under the
target name. A reader never sees a half-written scan, an error (or Ctrl-C) midway leaves no file,
and an existing output is never replaced.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from acres_lidar_ros.errors import OutputError

Writer = Callable[[BinaryIO], None]


def scan_file_stem(stamp_ns: int) -> str:
    """File stem of a scan's files, ``scan_<time>`` with the stamp in microseconds (spec).

    Parameters
    ----------
    stamp_ns : int
        Scan stamp, ns (non-negative).
    """
    stamp_ns = int(stamp_ns)
    if stamp_ns < 0:
        raise OutputError(f"scan stamp_ns {stamp_ns} is negative; a scan file name needs a stamp >= 0")
    return f"scan_{stamp_ns // 1000}"


def refuse_existing(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a ``Path``; raise ``OutputError`` if something already exists there."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        raise OutputError(f"output {path} exists already; refusing to overwrite it")
    return path


def make_directory(path: str | os.PathLike[str], what: str = "output directory") -> Path:
    """Create ``path`` and its parents (an existing directory is fine).

    Raises ``OutputError`` naming the path and the reason: a parent that is a file, a read-only
    parent, a full disk or any other refusal of the file system.
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as error:  # exist_ok: the path (or a parent) is something else than a directory
        raise OutputError(f"cannot create {what} {path}: {error.filename} exists and is not a directory") from error
    except NotADirectoryError as error:
        raise OutputError(f"cannot create {what} {path}: a parent of it is a file, not a directory") from error
    except PermissionError as error:
        raise OutputError(f"cannot create {what} {path}: permission denied (is {error.filename} read-only?)") from error
    except OSError as error:
        reason = "no space left on the device" if error.errno == errno.ENOSPC else (error.strerror or str(error))
        raise OutputError(f"cannot create {what} {path}: {reason}") from error
    return path


def atomic_write(path: str | os.PathLike[str], content: bytes | bytearray | memoryview | Writer) -> Path:
    """Write a new file at ``path`` all at once, or not at all.

    Parameters
    ----------
    path : str or PathLike
        Target file. Its directory must exist; the file must not.
    content : bytes-like, or callable(binary file) -> None
        The file's bytes, or a function that writes them into the open temporary file.

    Returns
    -------
    Path of the written file.

    Raises
    ------
    OutputError
        The target exists, its directory is missing, or the write failed (the cause is chained).
        Whatever ``content`` raises (including ``KeyboardInterrupt``) propagates unchanged, and in
        every failure no temporary file and no target file is left behind.
    """
    path = refuse_existing(path)
    directory = path.parent
    if not directory.is_dir():
        raise OutputError(f"cannot write {path}: directory {directory} does not exist")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error}") from error
    tmp_path = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            if callable(content):
                content(handle)
            else:
                handle.write(content)
            handle.flush()  # no fsync: the rename makes the file whole or absent for every reader;
            # fsync would add durability against a power cut at 1-2 ms per scan file.
        _publish(tmp_path, path)
    except BaseException as error:
        tmp_path.unlink(missing_ok=True)
        if isinstance(error, OutputError) or not isinstance(error, OSError):
            raise
        raise OutputError(f"cannot write {path}: {error}") from error
    return path


def _publish(tmp_path: Path, path: Path) -> None:
    """Move the finished temporary file to ``path`` without replacing an existing file.

    A hard link fails atomically when the target exists (another writer got there first); on file
    systems without hard links, fall back to a checked ``os.replace``.
    """
    try:
        os.link(tmp_path, path)
    except FileExistsError as error:
        raise OutputError(f"output {path} exists already; refusing to overwrite it") from error
    except OSError:
        refuse_existing(path)
        os.replace(tmp_path, path)
        return
    tmp_path.unlink()
