"""Configuration: the parameter schema, sensors files and materials."""
