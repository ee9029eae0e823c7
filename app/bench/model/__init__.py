"""The model area's benchmarks (each module exports ``BENCHMARKS``)."""
