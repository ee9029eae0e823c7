"""``afm bench``: the driver (``command.py``), shared helpers (``common.py``) and one
subfolder per area of benchmarks (each module exports ``BENCHMARKS``)."""
