"""Runtime updates of a running sensor: what may change, and when (the attribute list, "Runtime updates").

Each key of the sensors file is in one of three classes, marked in ``schema.LIDAR_PARAMS``:

* **live** (``runtime``): the change applies from the next scan, with no rebuild: noise, return
  mode, range limits and windows, mechanical noise, radiometry and weather;
* **rebuilt between scans** (``rebuild``): the beam pattern changes (columns, rings and their
  tables, lens, mount, sub-rays, spin and sweep start), so the scanner builds its pattern again
  between two scans; its scan numbers and its noise streams go on (the attribute list: "rebuild buffers
  without resetting the frame counter"), and a sweep started before the change is not finished
  with the new pattern (its partial scan is discarded, as the attribute list discards one when an edit
  changes tick or channel identity);
* **fixed**: everything else, with the reason in ``FIXED_REASONS``; the attribute list refuses a change of
  ``scanType`` and needs the sensor recreated.

An update is checked whole before anything changes (``plan_update``): a fixed key, a bad value or
a broken cross-key rule refuses the whole update with the project's error naming the key, the
value and the rule, and the previous parameters stay. ``Scanner.set_runtime_config``, the node's
loop (``runtime.loop.NodeLoop.rebuild``) and the node's ROS parameters (``ros.params``) apply
these same rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acres_lidar_ros.config.schema import LIDAR_PARAM
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError

FIXED_REASONS: dict[str, str] = {
    "enabled": "the node records the LiDAR or not from its start",
    "hz": "the node's scan schedule (due times k / hz) is built on it",
    "delay_s": "the node's release schedule is built on it",
    "output": "the files a run writes are chosen at its start",
    "frame_id": "the cloud's frame and the TF lookups of the mount are set up at start",
    "topic": "the node's cloud publisher is created at start",
    "point_type": "the node's cloud layout is chosen at start",
    "self_returns": "the self-return table is loaded at start",
    "model": "the node builds the scanner of one model (full or ACRES Core's) at start",
    "scan_type": "the model is built for one scanning principle (the attribute list: recreate the sensor)",
    "emitters": "the emitters block sets the cells of a scan, their tick and channel identity (the attribute list: "
    "recreate the sensor)",
}
"""Why a fixed key cannot change while running (other fixed keys: ``DEFAULT_FIXED_REASON``)."""
DEFAULT_FIXED_REASON = "it is read when the sensor is built"
FIXED_BLOCKS = ("emitters",)
"""Blocks of the lidar block, not keys of the schema, that an update may name (all fixed)."""


def update_class(key: str) -> str:
    """``"live"``, ``"rebuild"`` or ``"fixed"`` for a dotted lidar key (ConfigError if unknown)."""
    if key in FIXED_BLOCKS:
        return "fixed"
    param = LIDAR_PARAM.get(key)
    if param is None:
        raise ConfigError(f"lidar.{key}: unknown key; allowed: {', '.join(sorted(LIDAR_PARAM))}")
    return "live" if param.runtime else "rebuild" if param.rebuild else "fixed"


def fixed_reason(key: str) -> str:
    """The refusal of a change of the fixed ``key`` while running."""
    return (
        f"lidar.{key} cannot change while running: {FIXED_REASONS.get(key, DEFAULT_FIXED_REASON)}; set it at "
        "start-up (the keys that change live: see docs/sensors.md, 'Runtime updates')"
    )


@dataclass(frozen=True)
class RuntimeUpdate:
    """A checked update (``plan_update``).

    Attributes
    ----------
    config : SensorConfig
        The sensor after the update, validated whole.
    rebuild : bool
        A key that changes the beam pattern changed: the scanner builds its pattern again.
    changed : tuple of str
        The keys whose value changes.
    """

    config: SensorConfig
    rebuild: bool
    changed: tuple[str, ...]


def plan_update(config: SensorConfig, overrides: dict[str, Any]) -> RuntimeUpdate:
    """Check an update of dotted lidar keys against ``config`` (nothing is changed).

    Raises
    ------
    ConfigError
        For an unknown key, a fixed key whose value changes (setting a fixed key to its current
        value is no change and is accepted), or any value or rule the sensors file refuses; the
        message names the key, the value and the rule.
    """
    changed = []
    for key, value in overrides.items():
        kind = update_class(key)  # unknown keys first
        checked = value if key in FIXED_BLOCKS else LIDAR_PARAM[key].validate(value, f"lidar.{key}")
        if checked != _value(config, key):
            if kind == "fixed":
                raise ConfigError(fixed_reason(key))
            changed.append(key)
    updated = config.with_overrides(overrides)  # the rules that join keys
    rebuild = any(update_class(key) == "rebuild" for key in changed)
    return RuntimeUpdate(updated, rebuild, tuple(changed))


def _value(config: SensorConfig, key: str) -> Any:
    node: Any = config.effective["lidar"]
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node
