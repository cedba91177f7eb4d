"""Reading input files within documented limits: sensors files, scenes, box tracks, tables.

Every input file goes through ``read_regular_file``: only a regular file is read (a FIFO, a
device such as ``/dev/zero`` or a directory is refused before a byte is read, so no read can
block or run without end), and only up to the size limit of its kind. JSON files then go
through ``parse_json``, which refuses what Python's ``json`` module would turn into a raw
exception or a silent change:

* bytes that are not UTF-8 (the message gives the offset of the first bad byte);
* nesting deeper than ``MAX_JSON_DEPTH`` (checked before parsing, so no ``RecursionError``);
* a key given twice in one object (the later value would silently win);
* ``NaN``, ``Infinity`` and integers beyond 64 bits do not become numbers: they load as
  ``InvalidNumber`` values, which every validator refuses, so the message names the key. A
  decimal beyond float64 (``1e400``) loads as ``inf``, which every validator refuses too.

The limits are documented in docs/scene_format.md and the README's parameter section.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.errors import AcresLidarError, ConfigError

#: Deepest nesting of JSON objects and lists in any input file (the shipped files use 4).
MAX_JSON_DEPTH = 64
#: Largest sensors file and box-track file, bytes.
MAX_SENSORS_FILE_BYTES = 1 << 20
MAX_BOX_TRACKS_FILE_BYTES = 64 << 20
#: Largest JSON scene file (inline grids make it big; ``.npy`` files are the compact form).
MAX_SCENE_FILE_BYTES = 64 << 20
#: Largest integer magnitude a JSON file may hold: the int64 range.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


class InvalidNumber:
    """A JSON number literal that is not a finite 64-bit value (``NaN``, ``Infinity``, an
    integer beyond int64). It is no ``int`` or ``float``, so every validator refuses it and its
    message names the key; ``repr`` shows the literal (shortened)."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal

    def __repr__(self) -> str:
        if len(self.literal) <= 24:
            return self.literal
        return f"{self.literal[:12]}...({len(self.literal)} digits)"


def file_kind(mode: int) -> str:
    """A file type in words, for messages."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_regular_file(
    path: Path, what: str, max_bytes: int, error: type[AcresLidarError] = ConfigError, expected_bytes: int | None = None
) -> int:
    """Size of the regular file ``path``; raises ``error`` naming ``what`` when it is missing,
    not a regular file, larger than ``max_bytes`` or not ``expected_bytes`` long."""
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        reason = getattr(exc, "strerror", None) or str(exc)
        raise error(f"{what} {str(path)!r} cannot be read: {reason}") from exc
    return _check_stat(info, path, what, max_bytes, error, expected_bytes)


def _check_stat(
    info: os.stat_result,
    path: Path,
    what: str,
    max_bytes: int,
    error: type[AcresLidarError],
    expected_bytes: int | None,
) -> int:
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{what} {str(path)!r} is {file_kind(info.st_mode)}: expected a regular file")
    if expected_bytes is not None and info.st_size != expected_bytes:
        raise error(f"{what} {str(path)!r} has {info.st_size} bytes: expected {expected_bytes} bytes")
    if info.st_size > max_bytes:
        raise error(f"{what} {str(path)!r} has {info.st_size} bytes: the limit is {max_bytes} bytes")
    return int(info.st_size)


def read_regular_file(
    path: str | os.PathLike[str],
    what: str,
    max_bytes: int,
    error: type[AcresLidarError] = ConfigError,
    expected_bytes: int | None = None,
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (exactly ``expected_bytes`` if given).

    The file is opened non-blocking and checked again on the open descriptor, so a FIFO swapped
    in after the first check cannot block the read; at most ``max_bytes + 1`` bytes are read, so
    a file that grows while it is read is refused rather than read without end.
    """
    path = Path(path)
    check_regular_file(path, what, max_bytes, error, expected_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise error(f"{what} {str(path)!r} cannot be read: {reason}") from exc
    try:
        _check_stat(os.fstat(fd), path, what, max_bytes, error, expected_bytes)
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise error(f"{what} {str(path)!r} cannot be read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes or (expected_bytes is not None and len(data) != expected_bytes):
        raise error(f"{what} {str(path)!r} changed size while it was read: expected a file that stays as it is")
    return data


class _DuplicateKey(Exception):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def parse_integer(literal: str) -> int | InvalidNumber:
    """An integer literal as JSON loads it here: an ``int`` within int64, else ``InvalidNumber``."""
    literal = literal.strip()
    if len(literal) > 20:
        return InvalidNumber(literal)
    value = int(literal)
    return value if INT64_MIN <= value <= INT64_MAX else InvalidNumber(literal)


def json_depth(text: str) -> tuple[int, int]:
    """Deepest nesting of ``[``/``{`` outside strings, and the character offset where it is
    reached (-1 within the limit)."""
    depth, _ = _depth(_STRING.sub('""', text).encode("utf-8", "surrogatepass"), np.uint8)
    if depth <= MAX_JSON_DEPTH:
        return depth, -1
    # Too deep: blank the strings keeping their length, and count in characters, so the offset
    # is the file's (slower, only on this error path).
    blank = _STRING.sub(lambda m: '"' + " " * (len(m.group()) - 2) + '"', text)
    return _depth(blank.encode("utf-32-le", "surrogatepass"), np.uint32)


def _depth(skeleton: bytes, unit: type[np.unsignedinteger]) -> tuple[int, int]:
    """Depth and offset (in ``unit``s) of the deepest point of a text whose strings hold no brackets."""
    codes: np.ndarray = np.frombuffer(skeleton, unit)
    where = np.flatnonzero(np.isin(codes, (0x5B, 0x7B, 0x5D, 0x7D)))
    if not len(where):
        return 0, -1
    step = np.where(np.isin(codes[where], (0x5B, 0x7B)), 1, -1)
    depth = np.cumsum(step)
    deepest = int(np.argmax(depth))
    return int(depth[deepest]), int(where[deepest])


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]', re.DOTALL)


def json_path_at(text: str, offset: int) -> str:
    """The JSON path (``lidar.columns[0][0]``) of the value that starts at ``offset`` (the deepest
    bracket of a document too deep to parse), from the keys and indices before it; beyond 12
    levels it is shortened to ``[...]``."""
    stack: list[list[Any]] = []  # [kind, key or index]
    last_string = ""
    for match in _TOKEN.finditer(text, 0, offset):
        token = match.group()
        if token == "{":
            stack.append(["o", "?"])
        elif token == "[":
            stack.append(["a", 0])
        elif token in "}]":
            if stack:
                stack.pop()
        elif token == ",":
            if stack and stack[-1][0] == "a":
                stack[-1][1] += 1
        elif token == ":":
            if stack and stack[-1][0] == "o":
                stack[-1][1] = last_string
        else:
            last_string = json.loads(token) if len(token) < 200 else token[1:40] + "..."
    parts: list[str] = []
    for kind, key in stack[:12]:
        parts.append(f"[{key}]" if kind == "a" else ("." if parts else "") + str(key))
    return "".join(parts) + ("[...]" if len(stack) > 12 else "") or "(top level)"


def parse_json(data: bytes, what: str, path: str | os.PathLike[str], error: type[AcresLidarError] = ConfigError) -> Any:
    """Parse the bytes of a JSON input file within the limits of this module (see its docstring)."""
    name = str(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{what} {name!r}: byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8: "
            "expected a UTF-8 text file"
        ) from exc
    depth, offset = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise error(
            f"{what} {name!r}: {json_path_at(text, offset)} = [...]: objects and lists nest {depth} levels deep "
            f"(at character {offset}): the limit is {MAX_JSON_DEPTH}"
        )
    try:
        return json.loads(text, object_pairs_hook=_object, parse_int=parse_integer, parse_constant=InvalidNumber)
    except _DuplicateKey as exc:
        raise error(
            f"{what} {name!r}: key {exc.args[0]!r} appears twice in one object: expected each key once"
        ) from exc
    except json.JSONDecodeError as exc:
        raise error(f"{what} {name!r} is not valid JSON: {exc}") from exc
    except RecursionError as exc:  # the depth check above keeps this out of reach; kept as a guard
        raise error(f"{what} {name!r}: nesting too deep: the limit is {MAX_JSON_DEPTH}") from exc


def load_json_file(
    path: str | os.PathLike[str], what: str, max_bytes: int, error: type[AcresLidarError] = ConfigError
) -> Any:
    """``read_regular_file`` then ``parse_json``."""
    return parse_json(read_regular_file(path, what, max_bytes, error), what, path, error)
