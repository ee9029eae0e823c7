"""The training area's benchmarks (each module exports ``BENCHMARKS``)."""
