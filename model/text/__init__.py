"""Text in and out of the model: the one tokenizer (importable without JAX) and the chat format.

Import the submodules; this package imports nothing."""
