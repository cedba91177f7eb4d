"""Command-line input: negative pose values, the spec's -SensorLidar* options,
lidar.enabled false, and output directories that cannot be made."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from rosbags.highlevel import AnyReader

import acres_lidar_ros
from acres_lidar_ros.apps import cli
from acres_lidar_ros.config.schema import LIDAR_PARAM
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.outputs.pcd import read_pcd


def run(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def parse(*argv):
    return cli.build_parser().parse_args(cli.protect_negative_numbers(list(argv)))


def test_a_negative_number_is_a_pose_value():
    args = parse("scan", "--pose", "0", "0", "-1e6", "0", "-2.5E-3", "-90", "--seed", "-0")
    assert args.pose == [0.0, 0.0, -1e6, 0.0, -2.5e-3, -90.0]
    args = parse("scan", "--pose", "-inf", "0", "0", "0", "0", "0", "--no-noise")
    assert args.pose[0] == float("-inf") and args.no_noise  # -inf parses; the command refuses it
    args = parse("record", "--duration", "-1e3", "--seed", "-7")
    assert args.duration == -1000.0 and args.seed == -7  # parsed; the command refuses them by name


def test_options_after_a_pose_are_still_options():
    args = parse("scan", "--pose", "1", "2", "3", "4", "5", "6", "--no-weather", "--rain", "-1e2")
    assert args.pose == [1, 2, 3, 4, 5, 6] and args.no_weather and args.rain == -100.0
    with pytest.raises(SystemExit):  # five values and an option: argparse's own usage error
        parse("scan", "--pose", "1", "2", "3", "4", "5", "--no-weather")


def test_scan_at_a_negative_height_runs(tmp_path, capsys):
    out = tmp_path / "deep"
    code, stdout, err = run(
        capsys, "scan", "--pose", "0", "0", "-1e6", "0", "0", "0", "--no-self-returns", "--out", str(out)
    )
    assert code == 0, err
    assert stdout.startswith("0 points of 57600 beams")  # a kilometre below the farm sees nothing
    assert json.loads((out / "config.json").read_text())["run"]["pose"][2] == -1e6


# Each option with a bad value: the message is the one a sensors file with that value gets.
BAD_VALUES = {
    "--hz": "500",
    "--columns": "1e3",
    "--rings": "0",
    "--range": "-5",
    "--return-mode": "loudest",
    "--sub-rays": "3",
    "--divergence": "25",
}


@pytest.mark.parametrize("option", list(cli.SENSOR_OPTIONS))
def test_sensor_options_are_refused_with_the_sensors_file_message(tmp_path, capsys, option):
    key = cli.SENSOR_OPTIONS[option]
    text = BAD_VALUES[option]
    value = cli._command_value(text, LIDAR_PARAM[key].kind)
    sensors = tmp_path / "s.json"
    sensors.write_text(json.dumps({"lidar": {key: value}}, allow_nan=True))
    with pytest.raises(ConfigError) as from_file:
        load_sensor_config(sensors)
    code, _, err = run(capsys, "scan", "--sensor", "default", option, text, "--out", str(tmp_path / "o"))
    assert code == 2
    key_message = str(from_file.value).split(f"{str(sensors)!r}: ", 1)[1]  # the file's message, less its name
    assert key_message.startswith(f"lidar.{key} = ")
    assert f"{option} {value}: {key_message}" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_sensor_options_replace_the_file_keys(tmp_path, capsys):
    out = tmp_path / "o"
    argv = ["scan", "--sensor", "default", "--hz", "5", "--columns", "90", "--rings", "4", "--range", "80"]
    argv += ["--return-mode", "first", "--sub-rays", "1", "--divergence", "2.5", "--format", "pcd", "--out", str(out)]
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    lidar = json.loads((out / "config.json").read_text())["sensors"]["lidar"]
    assert (lidar["hz"], lidar["columns"], lidar["rings"], lidar["range_m"]) == (5.0, 90, 4, 80.0)
    assert (lidar["return_mode"], lidar["sub_rays"], lidar["beam_divergence_mrad"]) == ("first", 1, 2.5)
    assert read_pcd(next((out / "lidar").glob("*.pcd"))).shape == (90, 4)  # HEIGHT columns, WIDTH rings


def test_rings_against_an_elevation_table_is_refused_not_ignored(tmp_path, capsys):
    code, _, err = run(capsys, "scan", "--rings", "16", "--out", str(tmp_path / "o"))
    assert code == 2
    assert "--rings 16: lidar.rings = 16, but the sensors file" in err and "sets 32 rings" in err
    config = cli.apply_sensor_overrides(load_sensor_config("polaris"), {"rings": 32})
    assert config.rings == 32


def test_values_that_are_no_numbers_are_named(tmp_path, capsys):
    for argv, message in [
        (["--divergence", "nan"], "--divergence nan: lidar.beam_divergence_mrad = nan: expected a number >= 0"),
        (["--hz", "-inf"], "--hz -inf: lidar.hz = -inf: expected a number >= 1 and <= 120"),
        (["--columns", "many"], "--columns many: lidar.columns = 'many': expected an integer >= 4 and <= 3600"),
        (["--columns", "9" * 5000], "lidar.columns = 999999999999...(5000 digits): expected an integer >= 4"),
    ]:
        code, _, err = run(capsys, "scan", *argv, "--out", str(tmp_path / "o"))
        assert code == 2 and message in err, err


def disabled_sensors(tmp_path) -> Path:
    path = tmp_path / "off.json"
    path.write_text(json.dumps({"extends": str(config_dir() / "sensors_polaris.json"), "lidar": {"enabled": False}}))
    return path


@pytest.mark.parametrize("command", ["scan", "bench"])
def test_lidar_disabled_scan_and_bench_say_so(tmp_path, capsys, command):
    argv = [command, "--sensor", str(disabled_sensors(tmp_path))]
    argv += ["--out", str(tmp_path / "o")] if command == "scan" else ["--scans", "1"]
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert f"lidar.enabled is false in {tmp_path / 'off.json'}: the LiDAR is off, so {command} has nothing" in err
    assert not (tmp_path / "o").exists()


def test_lidar_disabled_record_records_no_lidar_and_says_so(tmp_path, capsys):
    out = tmp_path / "o"
    argv = ["record", "--sensor", str(disabled_sensors(tmp_path)), "--duration", "0.5", "--no-progress"]
    code, stdout, err = run(capsys, *argv, "--out", str(out))
    assert code == 0, err
    assert "lidar.enabled is false" in err and "recording no LiDAR" in err
    with AnyReader([out / "bag"]) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
    assert counts.get("/lidar/points", 0) == 0 and counts["/odom"] > 10
    assert not list((out / "lidar").iterdir())
    assert json.dumps(json.loads((out / "episode.json").read_text())).count('"scans": 0') == 1


def test_an_output_path_under_a_file_is_named(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run(capsys, "scan", "--out", str(blocker / "run"))
    assert code == 2 and f"cannot create output directory {blocker / 'run' / 'lidar'}: a parent of it is a file" in err
    code, _, err = run(capsys, "scan", "--out", str(blocker))
    assert code == 2 and f"output directory {blocker} exists and is not a directory" in err


def test_an_output_path_under_a_read_only_directory_is_named(tmp_path, capsys):
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        code, _, err = run(capsys, "scan", "--out", str(locked / "run"))
        assert code == 2 and "permission denied" in err
        return
    # Root writes into read-only directories: the command runs as nobody instead (util-linux setpriv),
    # in a folder nobody can reach (pytest's tmp_path is root's alone), on the package under test.
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root without setpriv: runs as a non-root user, or as root with util-linux (.ci/run)")
    place = Path(tempfile.mkdtemp(prefix="acres-read-only-"))
    try:
        place.chmod(0o755)
        (place / "numba").mkdir(mode=0o777)
        (place / "numba").chmod(0o777)
        locked = place / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        package_root = Path(acres_lidar_ros.__file__).resolve().parents[1]
        env = dict(os.environ, PYTHONPATH=str(package_root), NUMBA_CACHE_DIR=str(place / "numba"), HOME=str(place))
        command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m"]
        result = subprocess.run(
            [*command, "acres_lidar_ros.apps.cli", "scan", "--out", str(locked / "run")],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert result.returncode == 2, result.stderr
        assert f"cannot create output directory {locked / 'run'}" in result.stderr, result.stderr
        assert "permission denied" in result.stderr and "Traceback" not in result.stderr
        assert not (locked / "run").exists()
    finally:
        shutil.rmtree(place, ignore_errors=True)


@pytest.mark.parametrize(
    "error, message",
    [
        (PermissionError(errno.EACCES, "Permission denied", "/ro"), "permission denied (is /ro read-only?)"),
        (OSError(errno.ENOSPC, "No space left on device"), "no space left on the device"),
        (OSError(errno.EROFS, "Read-only file system"), "Read-only file system"),
    ],
)
def test_directory_errors_of_the_file_system_are_named(tmp_path, capsys, monkeypatch, error, message):
    def refuse(self, *args, **kwargs):
        raise error

    monkeypatch.setattr(Path, "mkdir", refuse)
    code, _, err = run(capsys, "scan", "--out", str(tmp_path / "run"))
    assert code == 2 and f"cannot create output directory {tmp_path / 'run' / 'lidar'}: {message}" in err
    assert "Traceback" not in err
