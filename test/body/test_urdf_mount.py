"""urdf/polaris.urdf parses, and its joint chain base_footprint -> lidar is the sensors file's mount.

A reader of its own (``xml.etree`` and scipy's rotations), independent of ``acres_lidar_ros.body.urdf``:
URDF ``rpy`` is roll, pitch, yaw about fixed axes, the sensors file's convention.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.config.sensors import load_sensor_config

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "urdf" / "polaris.urdf"


def _origin(joint: ET.Element) -> np.ndarray:
    T = np.eye(4)
    origin = joint.find("origin")
    if origin is not None:
        xyz = [float(v) for v in origin.get("xyz", "0 0 0").split()]
        rpy = [float(v) for v in origin.get("rpy", "0 0 0").split()]
        T[:3, :3] = Rotation.from_euler("xyz", rpy).as_matrix()  # extrinsic x, y, z = Rz Ry Rx
        T[:3, 3] = xyz
    return T


def chain(root: ET.Element, parent: str, child: str) -> tuple[np.ndarray, list[ET.Element]]:
    """``T_parent_child`` and the joints from ``parent`` down to ``child``."""
    joint_of_child = {j.find("child").get("link"): j for j in root.findall("joint")}
    joints = []
    link = child
    while link != parent:
        if link not in joint_of_child:
            raise AssertionError(f"no joint chain from {parent!r} to {child!r} (stopped at {link!r})")
        joints.append(joint_of_child[link])
        link = joint_of_child[link].find("parent").get("link")
    T = np.eye(4)
    for joint in reversed(joints):
        T = T @ _origin(joint)
    return T, list(reversed(joints))


def test_chain_composition_on_a_small_urdf():
    root = ET.fromstring(
        """<robot name="r">
             <link name="base_footprint"/><link name="base_link"/><link name="lidar"/>
             <joint name="a" type="fixed"><parent link="base_footprint"/><child link="base_link"/>
               <origin xyz="1 0 0.5" rpy="0 0 1.5707963267948966"/></joint>
             <joint name="b" type="fixed"><parent link="base_link"/><child link="lidar"/>
               <origin xyz="2 0 1" rpy="0.1 0 0"/></joint>
           </robot>"""
    )
    T, joints = chain(root, "base_footprint", "lidar")
    assert [j.get("name") for j in joints] == ["a", "b"]
    # base_link is turned 90 deg: its x axis is base_footprint's y axis.
    assert T[:3, 3] == pytest.approx([1.0, 2.0, 1.5])
    assert Rotation.from_matrix(T[:3, :3]).as_euler("xyz") == pytest.approx([0.1, 0.0, np.pi / 2])
    with pytest.raises(AssertionError, match="no joint chain"):
        chain(root, "base_link", "base_footprint")


@pytest.fixture(scope="module")
def robot() -> ET.Element:
    assert URDF.is_file(), f"{URDF} is missing: the launch file's robot_state_publisher needs it"
    return ET.parse(URDF).getroot()


def test_urdf_has_the_frames_and_geometry_the_node_and_rviz_need(robot):
    links = {link.get("name"): link for link in robot.findall("link")}
    config = load_sensor_config("polaris")
    for name in ("base_footprint", "base_link", config.frame_id):
        assert name in links, f"link {name!r} missing from {URDF.name}"
    children = [j.find("child").get("link") for j in robot.findall("joint")]
    assert len(children) == len(set(children)), "a link is the child of two joints"
    for joint in robot.findall("joint"):
        for end in ("parent", "child"):
            assert joint.find(end).get("link") in links, f"joint {joint.get('name')!r}: unknown {end} link"
    roots = set(links) - set(children)
    assert roots == {"base_footprint"}, f"the tree's root must be base_footprint, found {sorted(roots)}"
    with_both = [
        n for n, link in links.items() if link.find("visual") is not None and link.find("collision") is not None
    ]
    assert with_both, "the body needs links with visual and collision geometry"


def test_lidar_joint_chain_equals_the_sensors_file_mount(robot):
    config = load_sensor_config("polaris")
    T, joints = chain(robot, "base_footprint", config.frame_id)
    assert all(j.get("type") == "fixed" for j in joints), "the lidar mount must be rigid (fixed joints)"
    assert T[:3, 3] == pytest.approx(config.position_flu_m, abs=1e-4)
    expected = Rotation.from_euler("xyz", config.rpy_rad)
    error_rad = (Rotation.from_matrix(T[:3, :3]) * expected.inv()).magnitude()
    assert error_rad < 1e-5
    # And the spec's numbers directly: (2.5, 0, 2.039) m, roll -1.518 deg, pitch 5.317 deg.
    assert T[:3, 3] == pytest.approx([2.5, 0.0, 2.039], abs=1e-4)
    assert np.degrees(Rotation.from_matrix(T[:3, :3]).as_euler("xyz")) == pytest.approx([-1.518, 5.317, 0.0], abs=1e-3)


def test_imu_link_is_the_shipped_imu_files_mount(robot):
    """TF has the frame of /imu/data: the URDF's imu_link is config/imu.json's mount (docs/imu.md,
    "The IMU file"), read here from the JSON itself, and carries no geometry (the self-return
    table is made from the collision geometry, so it does not change)."""
    shipped = json.loads((ROOT / "config" / "imu.json").read_text())
    assert shipped["frame_id"] == "imu_link"
    T, joints = chain(robot, "base_footprint", "imu_link")
    assert [j.get("type") for j in joints] == ["fixed"]
    assert T[:3, 3] == pytest.approx(shipped["position_flu_m"], abs=1e-9)
    expected = Rotation.from_euler("xyz", np.radians(shipped["rpy_deg"]))
    assert (Rotation.from_matrix(T[:3, :3]) * expected.inv()).magnitude() < 1e-9
    link = next(link for link in robot.findall("link") if link.get("name") == "imu_link")
    assert link.find("visual") is None and link.find("collision") is None
