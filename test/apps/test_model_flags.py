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
    assert build_parser().parse_args([command]).model is None  # the sensors file's lidar.model


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


def test_the_sensors_file_key_selects_the_model_and_the_flag_wins(tmp_path):
    import numpy as np

    from acres_lidar_ros.scan.core_scanner import CoreScanner
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.scene.builder import SceneBuilder
    from acres_lidar_ros.scene.grids import TerrainGrid
    from acres_lidar_ros.tracing.trace import Tracer

    tracer = Tracer(SceneBuilder(TerrainGrid([-8.0, -8.0], 4.0, np.zeros((5, 5)))).build())
    core = load_sensor_config("polaris").with_overrides({"model": "core"})
    assert core.model == "core" and load_sensor_config("polaris").model == "full"
    args = build_parser().parse_args(["scan"])
    scanner = make_scanner(args, core, _options(args), tracer, None)
    assert type(scanner) is CoreScanner and scanner.config.model == "core"
    args = build_parser().parse_args(["scan", "--model", "full"])
    full = make_scanner(args, core, _options(args), tracer, None)
    assert type(full) is Scanner and full.config.model == "full"
    # Any other caller of the full model's Scanner (node, dataset, benchmarks) refuses a core sensor.
    with pytest.raises(ConfigError, match="lidar.model = 'core'"):
        Scanner(core, tracer=tracer)
    with pytest.raises(ConfigError, match="lidar.model"):
        load_sensor_config("polaris").with_overrides({"model": "game"})
