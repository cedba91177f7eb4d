"""``acres-lidar bench --packets``: what the sensor's packets cost against the scan, and how evenly
live UDP holds the packet rate (docs/packets.md, "Speed").

The scans are the sensor's (``--sensor``) along the built-in farm tour (``--scene`` a built-in farm),
with the sensors file's options; each scan's packets are encoded and framed into pcap records, as
``record --packets pcap`` does. With ``--udp-seconds S`` the benched scans' packets are then sent to
a receiver on 127.0.0.1 for S seconds, paced at their send times against the wall clock, and the
lateness of each send (its time minus its scheduled time) is reported.

Light imports at the top: ``apps.bench_args`` imports this module before any command runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import threading
import time
from typing import TYPE_CHECKING

from acres_lidar_ros.errors import ConfigError

if TYPE_CHECKING:
    from acres_lidar_ros.packets.formats import PacketEncoder

BUILT_IN = {"default": "v2", "farm_v2": "v2", "farm_v1": "v1"}


def add_packet_bench_arguments(bench: argparse.ArgumentParser) -> None:
    bench.add_argument(
        "--packets", action="store_true", help="the sensor's packets: encoding cost against the scan (docs/packets.md)"
    )
    bench.add_argument(
        "--udp-seconds", type=float, default=0.0, metavar="S", help="with --packets: send live UDP to 127.0.0.1 for S s"
    )


def run_packet_bench(args: argparse.Namespace) -> int:
    import numpy as np

    from acres_lidar_ros.body.self_returns import sensor_self_table
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.outputs.json_files import json_text, jsonable
    from acres_lidar_ros.packets.formats import default_addresses, packet_encoder, scan_records
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.tour import default_tour
    from acres_lidar_ros.sensor.poses import PoseHistory
    from acres_lidar_ros.tracing.trace import Tracer

    if args.scans < 1:
        raise ConfigError(f"--scans {args.scans}: expected an integer >= 1")
    if not (np.isfinite(args.udp_seconds) and 0.0 <= args.udp_seconds <= 600.0):
        raise ConfigError(f"--udp-seconds {args.udp_seconds}: expected 0 to 600 seconds")
    layout = BUILT_IN.get(args.scene)
    if layout is None:
        raise ConfigError(f"--scene {args.scene}: bench --packets drives a built-in farm ({', '.join(BUILT_IN)})")
    config = load_sensor_config(args.sensor)
    encoder = packet_encoder(args.sensor, config)
    scene = build_default_farm(seed=0, layout=layout)
    options = ScanOptions()
    self_table = sensor_self_table(config) if options.self_returns else None
    scanner = Scanner(config, options=options, tracer=Tracer(scene), self_table=self_table)
    tour = PoseHistory.from_arrays(*default_tour(scene, layout=layout), where="built-in tour")
    addresses = default_addresses(args.sensor)
    scan_ms, packet_ms, counts, scans = [], [], [], []
    period_s = config.period_s
    for k in range(args.scans + 1):  # one warm-up scan
        stamp_ns = int(round((tour.start_s + (k + 1) * period_s) * 1e9))
        started = time.perf_counter()
        scan = scanner.scan(tour, stamp_ns, index=k)
        traced = time.perf_counter()
        data, count = scan_records(encoder.encode(scan, first=k == 0), addresses, 0)
        encoded = time.perf_counter()
        if k > 0:
            scan_ms.append((traced - started) * 1e3)
            packet_ms.append((encoded - traced) * 1e3)
            counts.append(count)
            scans.append(scan)
    result: dict = {
        "sensor": args.sensor,
        "scans": args.scans,
        "scan_ms_median": float(np.median(scan_ms)),
        "packets_ms_median": float(np.median(packet_ms)),
        "packets_ms_p90": float(np.percentile(packet_ms, 90)),
        "packets_per_scan_median": float(np.median(counts)),
        "pcap_bytes_per_scan": len(data),
    }
    result["packets_pct_of_scan"] = 100.0 * result["packets_ms_median"] / result["scan_ms_median"]
    if args.udp_seconds > 0:
        result["udp"] = udp_pacing(encoder, scans, period_s, args.udp_seconds)
    if args.json:
        print(json_text(jsonable(result), indent=None, sort_keys=True), end="")
        return 0
    print(
        f"sensor {args.sensor}: {args.scans} scans, {result['packets_per_scan_median']:.0f} packets a scan "
        f"({result['pcap_bytes_per_scan']} pcap bytes)\n"
        f"  scan      {result['scan_ms_median']:8.2f} ms (median)\n"
        f"  packets   {result['packets_ms_median']:8.2f} ms (median; p90 {result['packets_ms_p90']:.2f} ms): "
        f"{result['packets_pct_of_scan']:.1f} % of the scan"
    )
    if "udp" in result:
        u = result["udp"]
        print(
            f"  udp       {u['packets']} packets in {u['seconds']:.1f} s ({u['rate_per_s']:.0f}/s, the sensor's "
            f"{u['nominal_rate_per_s']:.0f}/s); send time minus schedule: median {u['lateness_us_median']:.1f} us, "
            f"p99 {u['lateness_us_p99']:.1f} us, max {u['lateness_us_max']:.1f} us; received {u['received']}"
        )
    return 0


def udp_pacing(encoder: PacketEncoder, scans: list, period_s: float, seconds: float) -> dict:
    """Send the scans' packets (repeated, their times shifted by whole periods) to a receiver on
    127.0.0.1 for ``seconds``; the figures of the senders' lateness."""
    import numpy as np

    from acres_lidar_ros.packets.udp_stream import UdpSender

    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(1.0)
    port = receiver.getsockname()[1]
    received = [0]
    done = threading.Event()

    def receive() -> None:
        while not done.is_set():
            try:
                receiver.recv(65536)  # an Ouster lidar packet is 12608 bytes
                received[0] += 1
            except TimeoutError:
                continue

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    rounds = int(np.ceil(seconds / period_s))
    period_ns = int(round(period_s * 1e9))
    groups_of = [encoder.encode(scan, first=i == 0) for i, scan in enumerate(scans)]
    started = time.monotonic()
    with UdpSender("127.0.0.1", ports={g.kind: port for g in groups_of[0]}) as sender:
        for r in range(rounds):
            groups = groups_of[r % len(groups_of)]
            shift = (r - r % len(groups_of)) * period_ns
            sender.send([dataclasses.replace(g, send_ns=g.send_ns + shift) for g in groups])
        elapsed = time.monotonic() - started
        lateness_us = sender.lateness_ns * 1e-3
        sent = sender.sent
    time.sleep(0.2)
    done.set()
    thread.join(timeout=5)
    receiver.close()
    per_scan = np.mean([sum(len(g.payloads) for g in groups) for groups in groups_of])
    return {
        "seconds": elapsed,
        "packets": sent,
        "received": received[0],
        "rate_per_s": sent / elapsed,
        "nominal_rate_per_s": per_scan / period_s,
        "lateness_us_median": float(np.median(lateness_us)),
        "lateness_us_p99": float(np.percentile(lateness_us, 99)),
        "lateness_us_max": float(lateness_us.max()),
    }
