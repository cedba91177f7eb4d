"""The sim-time side of the cross-process ROS tests (``test_ros_processes``, ``test_ros_tf_bag``).

A test process publishes ``/clock`` and the poses, and receives ``lidar_node``'s clouds. Sim time
is this module's own clock: it advances ``STEP_NS`` per step, never reading the wall clock, and once
clouds arrive it is held at most ``LEAD_NS`` past the newest cloud's stamp. So however slow the
machine, the node is never handed a second due scan while it still traces one (a busy drop would
break the tests' "stamps one period apart"). A scan the node leaves out on purpose (the sweeps a
pattern rebuild discards) releases the hold by one period after ``HOLD_STEPS`` steps without a
cloud. Waits are counted in steps (each a bounded ``spin_once``), not in seconds.

Imported by those modules only after their ``pytest.importorskip("rclpy")``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import rclpy
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import PointCloud2

NS = 1_000_000_000
START_NS = 100 * NS  # sim time starts here (0 would be "no clock yet")
PERIOD_NS = NS // 10  # the Polaris' 10 Hz
POSE_PERIOD_NS = 20_000_000  # 50 Hz
STEP_NS = 1_000_000  # sim time per step
LEAD_NS = (
    150_000_000  # how far past the newest cloud sim time may run: the next scan's due time (+ delay), not the one after
)
HOLD_STEPS = 2_500  # steps held without a new cloud before the hold moves on by one period
SPIN_S = 0.002  # each step's spin_once timeout
#: rslidar_sdk's publisher (``create_publisher<PointCloud2>(topic, 100)``): the default QoS, keep last 100.
RSLIDAR_QOS = QoSProfile(
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
    history=HistoryPolicy.KEEP_LAST,
    depth=100,
)


def stamp_ns(stamp) -> int:
    return stamp.sec * NS + stamp.nanosec


def set_stamp(stamp, ns: int) -> None:
    stamp.sec, stamp.nanosec = divmod(ns, NS)


class SimFeed:
    """``/clock`` and a pose every ``POSE_PERIOD_NS`` out (``publish_pose(stamp_ns)``, from 5
    poses before ``START_NS``), ``/lidar/points`` in (``clouds``, ``latency_ms``: the middleware's
    source -> receive times), ``on_cloud(msg)`` called for each."""

    def __init__(
        self,
        node,
        publish_pose: Callable[[int], None],
        on_cloud: Callable[[PointCloud2], None] | None = None,
    ) -> None:
        self.node = node
        self.clock_pub = node.create_publisher(Clock, "/clock", 10)
        self.clouds: list[PointCloud2] = []
        self.latency_ms: list[float] = []
        self._publish_pose = publish_pose
        self._on_cloud_hook = on_cloud
        node.create_subscription(PointCloud2, "/lidar/points", self._on_cloud, RSLIDAR_QOS)
        self.sim_ns = START_NS
        self._next_pose_ns = START_NS - 5 * POSE_PERIOD_NS
        self._hold_ns: int | None = None  # None until the first cloud: sim time runs free
        self._held_steps = 0

    def _on_cloud(self, msg: PointCloud2, info: dict) -> None:
        self.clouds.append(msg)
        self.latency_ms.append((info["received_timestamp"] - info["source_timestamp"]) * 1e-6)
        hold = stamp_ns(msg.header.stamp) + LEAD_NS
        self._hold_ns = hold if self._hold_ns is None else max(self._hold_ns, hold)
        self._held_steps = 0
        if self._on_cloud_hook is not None:
            self._on_cloud_hook(msg)

    def step(self) -> None:
        """Advance sim time by ``STEP_NS`` unless held; publish /clock and every pose due by then;
        spin once."""
        if self._hold_ns is None or self.sim_ns + STEP_NS <= self._hold_ns:
            self.sim_ns += STEP_NS
        else:
            self._held_steps += 1
            if self._held_steps >= HOLD_STEPS:  # a scan left out on purpose: go on to the next
                self._hold_ns += PERIOD_NS
                self._held_steps = 0
        while self._next_pose_ns <= self.sim_ns:
            self._publish_pose(self._next_pose_ns)
            self._next_pose_ns += POSE_PERIOD_NS
        clock = Clock()
        set_stamp(clock.clock, self.sim_ns)
        self.clock_pub.publish(clock)
        rclpy.spin_once(self.node, timeout_sec=SPIN_S)

    def run_until(self, done: Callable[[], object], max_steps: int) -> bool:
        """Step until ``done()`` or ``max_steps`` steps; returns ``bool(done())``."""
        for _ in range(max_steps):
            if done():
                return True
            self.step()
        return bool(done())

    def close(self) -> None:
        """Destroy the node; print the clouds' publish -> receive latency (``pytest -s`` shows it)."""
        self.node.destroy_node()
        if self.latency_ms:
            v = np.asarray(self.latency_ms)
            print(
                f"publish -> receive over {v.size} clouds: median {np.median(v):.2f} ms, p95 {np.percentile(v, 95):.2f}"
            )


def process_output(process) -> str:
    """The last 4000 characters a child wrote to its log file (``process.log``)."""
    process.log.seek(0)
    return process.log.read().decode(errors="replace")[-4000:]
