"""The crawler's benchmarks (each module exports ``BENCHMARKS``)."""
