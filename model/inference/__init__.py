"""Using a model: the one log-probability function and batched sampling with a KV cache.

Import the submodules; this package imports nothing."""
