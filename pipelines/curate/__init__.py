"""The curate pipeline: its config, its stage table, the pipeline and its HTML report."""
