"""A model on disk: afm checkpoints (Orbax), Hugging Face folders (Qwen3 layout) and adapter directories.

Import the submodules; this package imports nothing."""
