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

# Compile numba's kernels into the installed package's cache now, so the first `acres-lidar record`
# runs warm (cold, a 20 s record pays about 6 s of compiling). One clear and one rainy scan reach
# every compiled pass; their files go to a temporary folder that is removed.
warm_dir="$(mktemp -d)"
trap 'rm -rf "$warm_dir"' EXIT
.venv/bin/acres-lidar scan --out "$warm_dir/clear" >/dev/null
.venv/bin/acres-lidar scan --rain 10 --visibility 2000 --out "$warm_dir/rain" >/dev/null
