"""The sensor: beam pattern, firing times and the pose history."""
