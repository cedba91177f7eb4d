"""JSON text and JSON files: strict text, whole files, JSON lines.

Every JSON the package writes goes through here: ``config.json`` and ``episode.json`` of a run
(``write_json``), the ``lidar.jsonl`` rows (``append_jsonl``), the self-return table's statistics
(``json_key_lines``) and the benchmark's figures (``json_text``). The text is strict JSON (no NaN
or Infinity, which standard JSON readers refuse): data that is not plain JSON is an
``OutputError``, and ``jsonable`` turns numpy values, tuples and paths into plain JSON data first.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.files import atomic_write


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: dicts (keys as ``str``), lists (from tuples and numpy arrays),
    ``int``, ``float``, ``str`` (from paths), ``bool`` and ``None``. A non-finite number becomes its
    name (``"inf"``, ``"-inf"``, ``"nan"``), which keeps clear air's ``visibility_m = inf`` legible
    in a strict JSON file. Anything else is returned unchanged (``json_text`` refuses it)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else str(v)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, Path):
        return str(value)
    return value


def json_text(data: Any, indent: int | None = 2, sort_keys: bool = False) -> str:
    """Strict JSON text of ``data`` with a trailing newline (``indent=None``: one line).

    Raises ``OutputError`` when ``data`` is not plain JSON data or holds NaN or Infinity."""
    try:
        return json.dumps(data, allow_nan=False, indent=indent, sort_keys=sort_keys) + "\n"
    except (TypeError, ValueError) as error:
        raise OutputError(f"not strict JSON data: {error}") from error


def json_line(row: Mapping[str, Any]) -> str:
    """One strict-JSON line (no NaN or Infinity, no spaces) with a trailing newline."""
    try:
        return json.dumps(row, allow_nan=False, separators=(",", ":")) + "\n"
    except (TypeError, ValueError) as error:
        raise OutputError(f"row is not strict JSON data: {error}") from error


def json_key_lines(mapping: Mapping[str, Any]) -> str:
    """A strict-JSON object with one key a line and each value compact on its line (a list stays
    on the line of its key), so that a committed file diffs key by key."""
    try:
        lines = [f"  {json.dumps(str(key))}: {json.dumps(value, allow_nan=False)}" for key, value in mapping.items()]
    except (TypeError, ValueError) as error:
        raise OutputError(f"not strict JSON data: {error}") from error
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_json(path: str | os.PathLike[str], data: Any, overwrite: bool = False) -> Path:
    """Write ``data`` as indented strict JSON (``json_text``) to ``path``, whole or not at all
    (``files.atomic_write``: never over an existing file unless ``overwrite``)."""
    try:
        text = json_text(data)
    except OutputError as error:
        raise OutputError(f"{path}: {error}") from error
    return atomic_write(path, text.encode("utf-8"), overwrite=overwrite)


def append_jsonl(path: str | os.PathLike[str], row: Mapping[str, Any]) -> Path:
    """Append one row to a JSON-lines file (created when missing) with a single ``write``, so a
    reader sees whole rows only."""
    path = Path(path)
    line = json_line(row).encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as error:
        raise OutputError(f"cannot append to {path}: {error}") from error
    return path


def trim_jsonl(path: str | os.PathLike[str]) -> int:
    """Cut a JSON-lines file back to its last complete row; return the bytes cut (0: it was whole).

    A row is complete when it ends with a newline and holds a JSON object. A kill in the middle
    of an append (a row longer than a page can be written in part) or a power cut (a tail of
    zeros) leaves an incomplete end; everything from the first incomplete row on is cut.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise OutputError(f"cannot read {path}: {error}") from error
    good = 0
    while good < len(data):
        end = data.find(b"\n", good)
        if end < 0:
            break
        try:
            row = json.loads(data[good:end])
        except (UnicodeDecodeError, ValueError):
            break
        if not isinstance(row, dict):
            break
        good = end + 1
    if good == len(data):
        return 0
    try:
        os.truncate(path, good)
    except OSError as error:
        raise OutputError(f"cannot cut {path} back to its last complete row: {error}") from error
    return len(data) - good
