"""A sensor's packets sent live over UDP, paced at their send times against a clock.

The first packet goes out at once; every later one when the clock has advanced by its send time
minus the first packet's (the sensor's packet rate: 1500 a second for the Helios in single
return). A packet whose time has passed (the scans come slower than real time) goes at once and
counts as late. Each send's lateness (actual minus scheduled, ns) is kept for the pacing figures.

Loopback (127.0.0.1) is the default destination; a broadcast address is refused unless asked
for (``broadcast=True``). The route to the host is checked when the sender opens (an unreachable
network is an ``OutputError`` then, not at the first packet), and a source port that is taken is
named in the error. The clock and the sleep are injected (tests use a manual clock).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import time
from collections.abc import Callable
from types import TracebackType

import numpy as np

from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.packets.packet_types import PacketGroup
from acres_lidar_ros.packets.pcap_file import check_port, ipv4_address

MAX_KEPT_LATENESS = 1_000_000
"""Most send latenesses kept for the figures (about 11 minutes of Helios packets)."""


class UdpSender:
    """Sends packet groups to ``host`` at their send times.

    Parameters
    ----------
    host : destination IPv4 address (127.0.0.1 by default in the CLI)
    ports : kind -> destination port, replacing the sensor's default port of that kind (optional)
    source_port : bind the sending socket to this port (0: any free one)
    broadcast : allow a broadcast destination
    clock_ns, sleep_s : the clock (monotonic ns) and the sleep, injected
    """

    def __init__(
        self,
        host: str,
        ports: dict[str, int] | None = None,
        source_port: int = 0,
        broadcast: bool = False,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        sleep_s: Callable[[float], None] = time.sleep,
    ) -> None:
        ipv4_address(host, "--udp-host")
        is_broadcast = host == "255.255.255.255" or ipaddress.IPv4Address(host).is_multicast
        if is_broadcast and not broadcast:
            raise ConfigError(
                f"--udp-host {host}: a broadcast or multicast address; pass --udp-broadcast to send there, "
                "or give the driver's host address (127.0.0.1 for one on this machine)"
            )
        self.host = host
        self.ports = {kind: check_port(port, f"port of {kind}") for kind, port in (ports or {}).items()}
        if source_port:
            check_port(source_port, "--udp-source-port")
        self.clock_ns, self.sleep_s = clock_ns, sleep_s
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            if broadcast:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            try:
                self.sock.bind(("0.0.0.0", int(source_port)))
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    raise OutputError(
                        f"--udp-source-port {source_port}: the port is in use on this machine; "
                        "choose another, or 0 for any free port"
                    ) from error
                raise OutputError(f"--udp-source-port {source_port}: cannot bind: {error}") from error
            self._check_route()
        except BaseException:
            self.sock.close()
            raise
        self.first_send_ns: int | None = None
        self.start_clock_ns = 0
        self.sent = 0
        self.late = 0
        self._lateness: list[np.ndarray] = []
        self._kept = 0

    def _check_route(self) -> None:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            if self.host == "255.255.255.255":
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            probe.connect((self.host, 9))  # a route lookup only: nothing is sent
        except OSError as error:
            raise OutputError(f"--udp-host {self.host}: unreachable from this machine ({error.strerror})") from error
        finally:
            probe.close()

    def send(self, groups: list[PacketGroup]) -> None:
        """Send a scan's packets in send-time order, each at its time (or at once when it is past)."""
        if not groups or sum(len(g.payloads) for g in groups) == 0:
            return
        kinds = np.concatenate([np.full(len(g.payloads), k) for k, g in enumerate(groups)])
        rows = np.concatenate([np.arange(len(g.payloads)) for g in groups])
        times = np.concatenate([np.asarray(g.send_ns, dtype=np.int64) for g in groups])
        order = np.argsort(times, kind="stable")
        if self.first_send_ns is None:
            self.first_send_ns = int(times[order[0]])
            self.start_clock_ns = int(self.clock_ns())
        due = self.start_clock_ns + (times[order] - self.first_send_ns)
        lateness = np.empty(order.size, np.int64)
        addresses = [(self.host, self.ports.get(g.kind, g.port)) for g in groups]
        for j, i in enumerate(order):  # one datagram per call: the socket API has no batch send here
            wait_ns = int(due[j]) - int(self.clock_ns())
            if wait_ns > 0:
                self.sleep_s(wait_ns * 1e-9)
            group = groups[int(kinds[i])]
            try:
                self.sock.sendto(group.payloads[int(rows[i])].tobytes(), addresses[int(kinds[i])])
            except OSError as error:
                raise OutputError(f"--udp-host {self.host}: sending a {group.kind} packet failed: {error}") from error
            lateness[j] = int(self.clock_ns()) - int(due[j])
        self.sent += order.size
        self.late += int((lateness > 1_000_000).sum())  # more than 1 ms behind its time
        keep = lateness[: max(0, MAX_KEPT_LATENESS - self._kept)]
        self._lateness.append(keep)
        self._kept += keep.size

    @property
    def lateness_ns(self) -> np.ndarray:
        """(n,) int64: each kept send's time minus its scheduled time."""
        return np.concatenate(self._lateness) if self._lateness else np.zeros(0, np.int64)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> UdpSender:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
