"""A transformer block (norms, RoPE, attention, SwiGLU) and its FP8 matmuls.

Import the submodules; this package imports nothing."""
