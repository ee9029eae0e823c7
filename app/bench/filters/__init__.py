"""The filters' benchmarks (each module exports ``BENCHMARKS``)."""
