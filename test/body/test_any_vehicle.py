"""Bodies from any URDF: another base link, xacro, the mount taken from the URDF, and the table's
recorded mount checked when a sensors file names the table.

Mounts expected here are computed from the numbers written in the test URDFs with scipy's
rotations (URDF ``rpy``: fixed axes x, y, z), not through ``acres_lidar_ros.body.urdf``.
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.apps import cli
from acres_lidar_ros.body.self_returns import sensor_self_table
from acres_lidar_ros.body.self_table_gen import generate_self_table
from acres_lidar_ros.body.urdf import load_urdf
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError

# A tractor whose root is base_link, its sensor link "rslidar" 0.5 m ahead, 2.2 m up, pitched 0.05 rad
# down-forward and yawed 0.1 rad; a cab box in front of the sensor's lower rings.
LIDAR_XYZ = (0.5, 0.0, 2.2)
LIDAR_RPY = (0.02, 0.05, 0.1)
TRACTOR_XACRO = """<?xml version="1.0"?>
<robot name="tractor" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:property name="sensor_z" value="2.2"/>
  <xacro:macro name="wheel" params="name x y">
    <link name="${name}"><collision><geometry><cylinder radius="0.6" length="0.4"/></geometry></collision></link>
    <joint name="${name}_joint" type="continuous"><parent link="base_link"/><child link="${name}"/>
      <origin xyz="${x} ${y} 0.6" rpy="1.5707963267948966 0 0"/></joint>
  </xacro:macro>
  <link name="base_link"><collision><origin xyz="-0.5 0 1.2"/><geometry><box size="2.0 1.4 1.6"/></geometry></collision></link>
  <xacro:wheel name="rear_left" x="-1.0" y="0.9"/>
  <xacro:wheel name="rear_right" x="-1.0" y="-0.9"/>
  <link name="rslidar"/>
  <joint name="rslidar_joint" type="fixed"><parent link="base_link"/><child link="rslidar"/>
    <origin xyz="0.5 0 ${sensor_z}" rpy="0.02 0.05 0.1"/></joint>
</robot>
"""


def expanded(text: str) -> str:
    """The xacro above expanded by hand: the property and the two macro calls written out."""
    wheel = (
        '<link name="{n}"><collision><geometry><cylinder radius="0.6" length="0.4"/></geometry></collision></link>'
        '<joint name="{n}_joint" type="continuous"><parent link="base_link"/><child link="{n}"/>'
        '<origin xyz="-1.0 {y} 0.6" rpy="1.5707963267948966 0 0"/></joint>'
    )
    body = text.split("</xacro:macro>")[1]
    body = body.replace('<xacro:wheel name="rear_left" x="-1.0" y="0.9"/>', wheel.format(n="rear_left", y="0.9"))
    body = body.replace('<xacro:wheel name="rear_right" x="-1.0" y="-0.9"/>', wheel.format(n="rear_right", y="-0.9"))
    return '<?xml version="1.0"?>\n<robot name="tractor">' + body.replace("${sensor_z}", "2.2")


def run(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def expected_mount() -> tuple[np.ndarray, np.ndarray]:
    return np.array(LIDAR_XYZ), np.rad2deg(np.array(LIDAR_RPY))


def test_a_xacro_file_is_expanded_to_the_same_robot_as_its_hand_expansion(tmp_path):
    pytest.importorskip("xacro")
    xacro_file = tmp_path / "tractor.urdf.xacro"
    xacro_file.write_text(TRACTOR_XACRO)
    plain = tmp_path / "tractor.urdf"
    plain.write_text(expanded(TRACTOR_XACRO))
    a, b = load_urdf(xacro_file), load_urdf(plain)
    assert a.links == b.links == ("base_link", "rear_left", "rear_right", "rslidar")
    assert a.root == "base_link"
    for link in a.links:
        np.testing.assert_array_equal(a.T_root_link(link), b.T_root_link(link))
    T = a.T_root_link("rslidar")
    np.testing.assert_allclose(T[:3, 3], LIDAR_XYZ, atol=1e-12)
    np.testing.assert_allclose(T[:3, :3], Rotation.from_euler("xyz", LIDAR_RPY).as_matrix(), atol=1e-12)


def test_without_the_xacro_package_the_file_is_refused_with_the_command_that_expands_it(tmp_path, monkeypatch):
    xacro_file = tmp_path / "tractor.urdf.xacro"
    xacro_file.write_text(TRACTOR_XACRO)
    monkeypatch.setitem(sys.modules, "xacro", None)  # import xacro raises ImportError
    with pytest.raises(ConfigError) as error:
        load_urdf(xacro_file)
    message = str(error.value)
    assert str(xacro_file) in message and "pip install xacro" in message
    assert f"xacro {xacro_file} > {tmp_path / 'tractor.urdf'}" in message  # the command to run


def test_a_broken_xacro_names_the_file_and_the_error(tmp_path):
    pytest.importorskip("xacro")
    bad = tmp_path / "bad.urdf.xacro"
    bad.write_text(TRACTOR_XACRO.replace("${sensor_z}", "${no_such_property}"))
    with pytest.raises(ConfigError) as error:
        load_urdf(bad)
    assert str(bad) in str(error.value) and "no_such_property" in str(error.value)


def test_a_base_link_root_needs_base_link_and_the_refusal_names_the_options(tmp_path):
    plain = tmp_path / "tractor.urdf"
    plain.write_text(expanded(TRACTOR_XACRO))
    with pytest.raises(ConfigError) as error:
        generate_self_table(plain, "polaris", lidar_link="rslidar")
    message = str(error.value)
    assert "no link 'base_footprint' (--base-link)" in message and "root: base_link" in message
    with pytest.raises(ConfigError) as error:
        generate_self_table(plain, "polaris", base_link="base_link")
    assert "no link 'lidar' (--lidar-link)" in str(error.value)


def test_a_mount_that_differs_gives_the_urdf_mount_to_paste_and_the_option(tmp_path):
    plain = tmp_path / "tractor.urdf"
    plain.write_text(expanded(TRACTOR_XACRO))
    with pytest.raises(ConfigError) as error:
        generate_self_table(plain, "polaris", lidar_link="rslidar", base_link="base_link")
    position, rpy_deg = expected_mount()
    message = str(error.value)
    assert f"position_flu_m {[round(v, 6) for v in position.tolist()]}" in message
    assert f"rpy_deg {[round(v, 6) for v in rpy_deg.tolist()]}" in message
    assert "--mount-from-urdf" in message


def test_mount_from_urdf_writes_an_overlay_that_scans_with_the_new_table(tmp_path, capsys):
    pytest.importorskip("xacro")
    xacro_file = tmp_path / "tractor.urdf.xacro"
    xacro_file.write_text(TRACTOR_XACRO)
    out = tmp_path / "tables" / "tractor_self.f32"
    argv = ["self-table", "--urdf", str(xacro_file), "--base-link", "base_link", "--lidar-link", "rslidar"]
    code, printed, err = run(capsys, *argv, "--mount-from-urdf", "--out", str(out))
    assert code == 0, err
    overlay = out.with_name("tractor_self_sensors.json")
    assert f"scan with --sensor {overlay}" in printed
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "tractor_self.f32",
        "tractor_self.json",
        "tractor_self_sensors.json",
    ]
    position, rpy_deg = expected_mount()
    config = load_sensor_config(overlay)
    np.testing.assert_allclose(config.position_flu_m, position, atol=1e-6)
    np.testing.assert_allclose(np.rad2deg(config.rpy_rad), rpy_deg, atol=1e-6)
    assert config.self_returns == out.resolve()
    assert config.columns == load_sensor_config("polaris").columns  # it extends the --sensor file
    stats = json.loads(out.with_suffix(".json").read_text())
    assert stats["mount"]["base_link"] == "base_link" and stats["mount"]["lidar_link"] == "rslidar"
    np.testing.assert_allclose(stats["mount"]["position_flu_m"], position, atol=1e-6)
    np.testing.assert_allclose(stats["mount"]["rpy_deg"], rpy_deg, atol=1e-6)
    assert stats["urdf_sha256"] == hashlib.sha256(xacro_file.read_bytes()).hexdigest()
    table = sensor_self_table(config)  # the overlay's mount is the table's: accepted
    assert table is not None and int((table.p_self > 0).sum()) == stats["cells_with_return"] > 0
    # The same mount by hand (no --mount-from-urdf) is accepted and gives the same table.
    by_hand = tmp_path / "by_hand.json"
    by_hand.write_text(
        json.dumps(
            {
                "extends": str(load_sensor_config("polaris").source),
                "lidar": {"position_flu_m": position.tolist(), "rpy_deg": rpy_deg.tolist()},
            }
        )
    )
    out2 = tmp_path / "by_hand_self.f32"
    code, _, err = run(capsys, *argv, "--sensor", str(by_hand), "--out", str(out2))
    assert code == 0, err
    a = np.frombuffer(out.read_bytes(), "<f4").reshape(4, -1)  # the overlay's mount is rounded to 1e-6
    b = np.frombuffer(out2.read_bytes(), "<f4").reshape(4, -1)
    np.testing.assert_allclose(a, b, atol=1e-4)
    assert ((a[0] > 0) == (b[0] > 0)).mean() > 0.999
    code, _, err = run(capsys, *argv, "--mount-from-urdf", "--out", str(out))
    assert code == 2 and "exists" in err  # all three files are refused before the trace


def test_a_sensors_file_that_moves_the_sensor_but_keeps_the_table_is_refused(tmp_path, repo_root):
    shipped = load_sensor_config("polaris")
    assert sensor_self_table(shipped) is not None  # the shipped mount is its table's
    stats = json.loads((repo_root / "config" / "polaris_lidar_self.json").read_text())
    np.testing.assert_allclose(stats["mount"]["position_flu_m"], shipped.position_flu_m, atol=1e-9)
    np.testing.assert_allclose(stats["mount"]["rpy_deg"], np.rad2deg(shipped.rpy_rad), atol=1e-9)
    moved = tmp_path / "moved.json"
    moved.write_text(
        json.dumps({"extends": str(shipped.source), "lidar": {"position_flu_m": [1.0, 0.0, 2.8], "rpy_deg": [0, 0, 0]}})
    )
    with pytest.raises(ConfigError) as error:
        sensor_self_table(load_sensor_config(moved))
    message = str(error.value)
    assert str(moved) in message and "polaris_lidar_self.f32" in message
    assert "position_flu_m [1.0, 0.0, 2.8]" in message and "position_flu_m [2.5, 0.0, 2.039]" in message
    assert "acres-lidar self-table" in message and '"self_returns": null' in message
    # A change within the tolerance (0.5 mm) is the same mount; none at all with the table off.
    near = {"extends": str(shipped.source), "lidar": {"position_flu_m": [2.5005, 0.0, 2.039]}}
    moved.write_text(json.dumps(near))
    assert sensor_self_table(load_sensor_config(moved)) is not None
    moved.write_text(
        json.dumps({"extends": str(shipped.source), "lidar": {"position_flu_m": [1.0, 0, 2.8], "self_returns": None}})
    )
    assert sensor_self_table(load_sensor_config(moved)) is None


def test_the_scan_command_refuses_the_moved_sensor_with_the_table(tmp_path, capsys, repo_root):
    moved = tmp_path / "moved.json"
    source = str(repo_root / "config" / "sensors_polaris.json")
    moved.write_text(json.dumps({"extends": source, "lidar": {"rpy_deg": [0.0, 0.0, 0.0]}}))
    code, _, err = run(capsys, "scan", "--sensor", str(moved), "--out", str(tmp_path / "run"))
    assert code == 2 and "was made for the mount" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()
