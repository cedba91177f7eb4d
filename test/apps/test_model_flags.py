"""``--model core`` on scan and record: the parser takes it, and options ACRES Core's LiDAR does not
have are refused by name instead of being ignored."""

from __future__ import annotations

import pytest

from acres_lidar_ros.apps.cli import _options, build_parser
from acres_lidar_ros.apps.model_flags import make_scanner
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError


@pytest.mark.parametrize("command", ["scan", "record"])
def test_model_flag_is_on_scan_and_record(command):
    args = build_parser().parse_args([command, "--model", "core", "--core-noise"])
    assert args.model == "core" and args.core_noise
    assert build_parser().parse_args([command]).model == "full"


@pytest.mark.parametrize(
    "extra, named",
    [(["--truth"], "--truth"), (["--rain", "5"], "--rain"), (["--no-radiometry"], "--no-radiometry")],
)
def test_core_model_refuses_what_it_does_not_have(extra, named):
    args = build_parser().parse_args(["scan", "--model", "core", *extra])
    with pytest.raises(ConfigError, match=named):
        make_scanner(args, load_sensor_config("polaris"), _options(args), None, None)


def test_core_noise_needs_the_core_model():
    args = build_parser().parse_args(["scan", "--core-noise"])
    with pytest.raises(ConfigError, match="--core-noise needs --model core"):
        make_scanner(args, load_sensor_config("polaris"), _options(args), None, None)
