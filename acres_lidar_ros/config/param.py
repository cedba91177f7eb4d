"""``Param``: one key of a sensors file (name, type, unit, default, allowed range, description)
and its validation. ``schema`` declares every key with it; blocks of their own (``emitters``)
declare theirs with it too.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from acres_lidar_ros.errors import ConfigError

Block = TypeVar("Block")

#: A TF frame name (used with fullmatch: no trailing newline): letters, digits, _ and /, not starting with a digit.
FRAME_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_/]*")
#: A ROS topic name (used with fullmatch): optional leading /, tokens of letters, digits and _.
TOPIC_NAME = re.compile(r"/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")
#: The kinds of key: ``Param``'s docstring says what each holds.
KINDS = ("bool", "int", "float", "str", "frame_name", "profile", "topic", "path", "float_list", "float_array")
#: The kinds whose value is a string.
TEXT_KINDS = ("str", "frame_name", "profile", "topic", "path")
#: Largest magnitude of a number key: beyond it the value does not fit the float32 it is packed into.
FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class Param:
    """One key of the sensors file.

    ``kind`` is one of ``bool``, ``int``, ``float``, ``str`` (one of ``choices``), ``frame_name`` (a
    TF frame name), ``profile`` (a point layout, one of ``choices``: the names of
    ``outputs.point_types.PROFILES``), ``topic`` (a ROS topic name), ``float_list`` (one value per ring, or ``length`` values when it
    is set), ``float_array`` (0 to ``max_items`` values, their count
    checked against another key by the loader), ``path`` (a file name relative to the sensors
    file, or null). ``nullable`` marks the keys whose ``null`` means "none" (the tables and
    ``self_returns``); every other ``null`` is an error. ``low``/``high`` bound numbers and each
    element of a list; ``low_open``/``high_open`` make a bound exclusive.

    How a running sensor takes a change (``config.updates``): ``runtime`` keys change live, at the
    next scan; ``rebuild`` keys change the beam pattern, which the scanner builds again between
    scans (its scan numbers and noise streams go on); every other key is fixed while running.
    """

    name: str
    kind: str
    default: Any
    unit: str = ""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    length: int | None = None
    int_values: tuple[int, ...] = ()
    description: str = ""
    runtime: bool = False
    nullable: bool = False
    rebuild: bool = False
    max_items: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind {self.kind!r} is none of {', '.join(KINDS)}")
        if (self.kind in ("str", "profile")) != bool(self.choices):
            raise ValueError(f"{self.name}: a {self.kind} key {'needs' if not self.choices else 'takes no'} choices")

    def allowed(self) -> str:
        """What the key allows, in words (used in error messages and the README)."""
        if self.kind == "bool":
            return "true or false"
        if self.kind == "profile":
            return "a point layout: one of " + ", ".join(self.choices)
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.int_values:
            return "one of " + ", ".join(str(v) for v in self.int_values)
        if self.kind == "path":
            return "a file name relative to the sensors file, or null"
        if self.kind == "frame_name":
            return "a frame name (letters, digits, _ and /, not starting with a digit)"
        if self.kind == "topic":
            return "a topic name such as /lidar/points"
        return self._allowed_number() + (", or null (none)" if self.nullable else "")

    def _allowed_number(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(("> " if self.low_open else ">= ") + _fmt(self.low))
        if self.high is not None:
            parts.append(("< " if self.high_open else "<= ") + _fmt(self.high))
        what = "an integer" if self.kind == "int" else "a number"
        bound = f"{what} {' and '.join(parts)}" if parts else f"a finite {what.split(' ', 1)[1]}"
        if self.kind == "float_list":
            count = f"{self.length} values" if self.length else "one value per ring"
            return f"a list of {count}, each {bound}"
        if self.kind == "float_array":
            return f"a list of at most {self.max_items} values, each {bound}"
        return bound

    def validate(self, value: Any, where: str) -> Any:
        """Check one value; return it in its Python type. ``where`` is the full key for messages."""
        if value is None:
            if self.nullable:
                return None
            raise ConfigError(f"{where} = null: expected {self.allowed()} (null is allowed only where documented)")
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ConfigError(f"{where} = {short_repr(value)}: expected {self.allowed()}")
            return value
        if self.kind in TEXT_KINDS:
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where} = {short_repr(value)}: expected {self.allowed()}")
            if self.choices and value not in self.choices:
                raise ConfigError(f"{where} = {short_repr(value)}: expected {self.allowed()}")
            if self.kind == "frame_name" and not FRAME_NAME.fullmatch(value):
                raise ConfigError(f"{where} = {short_repr(value)}: expected {self.allowed()}")
            if self.kind == "topic" and not TOPIC_NAME.fullmatch(value):
                raise ConfigError(f"{where} = {short_repr(value)}: expected {self.allowed()}")
            if self.kind == "path" and not _is_file_name(value):
                raise ConfigError(
                    f"{where} = {short_repr(value)}: expected {self.allowed()} (a name that can be a file)"
                )
            return value
        if self.kind == "float_list":
            if not isinstance(value, list) or not value:
                raise ConfigError(f"{where} = {short_repr(value)}: expected {self.allowed()}")
            if self.length is not None and len(value) != self.length:
                raise ConfigError(f"{where} has {len(value)} values: expected {self.allowed()}")
            return [self._number(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if self.kind == "float_array":
            if not isinstance(value, list) or len(value) > self.max_items:
                raise ConfigError(f"{where} = {short_repr(value)}: expected {self.allowed()}")
            return [self._number(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return self._number(value, where)

    def _number(self, value: Any, where: str) -> float | int:
        integer = self.kind == "int"
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type:
            raise ConfigError(f"{where} = {short_repr(value)}: expected {self.allowed()}")
        # Compared before any float conversion, so a huge integer is refused, never an OverflowError.
        if not integer and not (-FLOAT32_MAX <= value <= FLOAT32_MAX):
            raise ConfigError(f"{where} = {short_repr(value)}: expected {self.allowed()}")
        too_low = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        too_high = self.high is not None and (value >= self.high if self.high_open else value > self.high)
        if too_low or too_high or (self.int_values and value not in self.int_values):
            raise ConfigError(f"{where} = {short_repr(value)} is out of range: expected {self.allowed()}")
        return int(value) if integer else float(value)


def typed_block(cls: type[Block], values: Mapping[str, object], prefix: str = "", **derived: object) -> Block:
    """A block of the sensors file as its frozen dataclass ``cls``, each field from the key of its name.

    ``values`` are the schema-checked values by dotted key. A field ``name`` takes
    ``values[prefix + name]``; a field ``x_rad`` takes the key ``x_deg`` in radians, or ``x_mrad``
    times 1e-3; a list becomes a float64 array. ``derived`` gives the fields that are no key of their
    own (resolved from several keys) and wins over a key of the same name. A field with neither is a
    ``TypeError``: the dataclass and the schema disagree, which every load of a sensors file shows.
    """
    import numpy as np  # here, not at the top: the CLI module imports this layer before main (no numpy yet)

    kwargs: dict[str, object] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = field.name
        if name in derived:
            kwargs[name] = derived[name]
        elif prefix + name in values:
            kwargs[name] = _as_field(values[prefix + name])
        elif name.endswith("_rad") and prefix + name[:-4] + "_deg" in values:
            value = values[prefix + name[:-4] + "_deg"]
            kwargs[name] = (
                np.deg2rad(np.asarray(value, dtype=np.float64))
                if isinstance(value, list)
                else math.radians(_number(value))
            )
        elif name.endswith("_rad") and prefix + name[:-4] + "_mrad" in values:
            kwargs[name] = _number(values[prefix + name[:-4] + "_mrad"]) * 1e-3
        else:
            raise TypeError(f"{cls.__name__}.{name}: no key {prefix + name} in the schema and no derived value")
    return cls(**kwargs)


def _as_field(value: object) -> object:
    import numpy as np

    return np.asarray(value, dtype=np.float64) if isinstance(value, list) else value


def _number(value: object) -> float:
    return cast(float, value)  # the schema checked it


def _fmt(x: float) -> str:
    return f"{x:g}"


def short_repr(value: Any) -> str:
    """``repr`` of a value, shortened to 40 characters and its length for messages."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:16]}...({len(text)} characters)"


def _is_file_name(value: str) -> bool:
    """A path string that can name a file: no NUL, not ending in a separator, not ``.``/``..``."""
    last = value.replace("\\", "/").rsplit("/", 1)[-1]  # as written: PurePath("a/.").name is "a"
    return "\0" not in value and last not in ("", ".", "..")
