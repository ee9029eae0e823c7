"""The data pipelines' benchmarks (each module exports ``BENCHMARKS``) and the capacity model."""
