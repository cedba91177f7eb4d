"""The sensors' own UDP packets of a scan, and pcap files of them (docs/packets.md).

Modules: ``packet_types`` (a stream of payloads with its port and send times), ``velodyne``
(VLP-16, HDL-32E), ``helios`` (RoboSense RS-Helios), ``pcap_file`` (Ethernet/IPv4/UDP frames, pcap
records, a pcap written whole), ``formats`` (which sensor has which format; a recorder of scans).
"""
