"""Writing files: whole or not at all, and never over an existing file unless asked.

Every file the package writes goes through ``atomic_write``: the bytes go to a temporary file in
the target's directory, are flushed and ``fsync``ed to disk, and only then appear under the target
name (a link, or ``os.replace`` when overwriting is asked for), and the directory entry is synced
too. A reader never sees a half-written file, an error (or Ctrl-C) midway leaves neither a target
nor a temporary file, a power cut leaves the old state or the new file, and an existing file is
replaced only with ``overwrite=True`` (``acres-lidar self-table --force``).

For a new file the temporary is an anonymous one (Linux ``O_TMPFILE``) where the file system
offers it: it has no name until it is linked under the target's, so a kill at any moment leaves no
stray file. Elsewhere (and to overwrite) it is a named ``.<target>.<random>.tmp`` that an error
removes and that ``acres-lidar bag-repair`` removes after a kill.
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
#: Digits of the microseconds in a scan file's name: any stamp up to 10**16 us (year 2286 as
#: Unix time) sorts in time order.
STEM_DIGITS = 16


def scan_file_stem(stamp_ns: int) -> str:
    """File stem of a scan's files, ``scan_<time>`` with the stamp in microseconds (spec),
    zero-padded to ``STEM_DIGITS`` digits so that the names sort in time order.

    Parameters
    ----------
    stamp_ns : int
        Scan stamp, ns (non-negative).
    """
    stamp_ns = int(stamp_ns)
    if stamp_ns < 0:
        raise OutputError(f"scan stamp_ns {stamp_ns} is negative; a scan file name needs a stamp >= 0")
    return f"scan_{stamp_ns // 1000:0{STEM_DIGITS}d}"


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


def atomic_write(
    path: str | os.PathLike[str], content: bytes | bytearray | memoryview | Writer, overwrite: bool = False
) -> Path:
    """Write the file at ``path`` all at once, or not at all.

    Parameters
    ----------
    path : str or PathLike
        Target file. Its directory must exist; the file must not, unless ``overwrite``.
    content : bytes-like, or callable(binary file) -> None
        The file's bytes, or a function that writes them into the open temporary file.
    overwrite : bool
        Replace an existing file (atomically: readers see the old file or the new one).

    Returns
    -------
    Path of the written file.

    Raises
    ------
    OutputError
        The target exists (without ``overwrite``), its directory is missing, or the write failed
        (the cause is chained). Whatever ``content`` raises (including ``KeyboardInterrupt``)
        propagates unchanged, and in every failure no temporary file is left behind and the target
        is as it was.
    """
    path = Path(path) if overwrite else refuse_existing(path)
    directory = path.parent
    if not directory.is_dir():
        raise OutputError(f"cannot write {path}: directory {directory} does not exist")
    try:
        fd = None if overwrite else _anonymous_file(directory)  # linkat cannot replace a file
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error}") from error
    if fd is not None:
        _write_anonymous(fd, path, content)
        _sync_directory(directory)
        return path
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error}") from error
    tmp_path = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            _fill(handle, content)
        if overwrite:
            os.replace(tmp_path, path)
        else:
            _publish(tmp_path, path)
        _sync_directory(directory)
    except BaseException as error:
        tmp_path.unlink(missing_ok=True)
        if isinstance(error, OutputError) or not isinstance(error, OSError):
            raise
        raise OutputError(f"cannot write {path}: {error}") from error
    return path


def publish_temporary(tmp_path: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """Give a finished, synced temporary file of ``path``'s directory the name ``path``.

    For a file written over a long time (a stream of packets): it grows as ``.<name>.<random>.tmp``
    beside its target and appears whole, never over an existing file (``OutputError``), or not at all.
    """
    tmp_path, path = Path(tmp_path), Path(path)
    _publish(tmp_path, path)
    _sync_directory(path.parent)
    return path


def _fill(handle: BinaryIO, content: bytes | bytearray | memoryview | Writer) -> None:
    """Write ``content`` into the open file and sync it to the disk (whole after a power cut)."""
    if callable(content):
        content(handle)
    else:
        handle.write(content)
    handle.flush()
    os.fsync(handle.fileno())


def _anonymous_file(directory: Path) -> int | None:
    """An unnamed file in ``directory`` (``O_TMPFILE``), or None where the file system has none."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(directory, flag | os.O_WRONLY, 0o644)
    except OSError as error:
        if error.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return None
        raise


def _write_anonymous(fd: int, path: Path, content: bytes | bytearray | memoryview | Writer) -> None:
    """Fill the unnamed file ``fd`` and link it as ``path``; it vanishes on any failure."""
    try:
        with os.fdopen(fd, "wb") as handle:
            _fill(handle, content)
            # linkat(AT_SYMLINK_FOLLOW) of /proc/self/fd/N names an O_TMPFILE file, and fails
            # atomically when ``path`` exists. A src_dir_fd makes os.link call linkat (without
            # one, CPython calls link(2), which does not follow the /proc link).
            proc_fd = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.link(str(handle.fileno()), path, src_dir_fd=proc_fd, follow_symlinks=True)
            finally:
                os.close(proc_fd)
    except FileExistsError as error:
        raise OutputError(f"output {path} exists already; refusing to overwrite it") from error
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error}") from error


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


def _sync_directory(directory: Path) -> None:
    """``fsync`` the directory so the new name survives a power cut (where the platform allows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # e.g. a platform without directory handles: the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory; the file itself is synced
    finally:
        os.close(fd)
