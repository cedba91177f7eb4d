"""rclpy wiring only: the lidar node, the demo drive and the ROS parameters."""
