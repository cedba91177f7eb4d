"""The command line, the recorder and the benchmarks."""
