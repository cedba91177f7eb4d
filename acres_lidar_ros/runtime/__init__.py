"""The ROS-free node loop: pose ingestion, due times, pretrace, finish and publish decisions."""
