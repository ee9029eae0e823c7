"""The evaluation area's benchmarks (each module exports ``BENCHMARKS``)."""
