"""Report section 5's on-device compression: LoRA adapters and palettized weights.

Import the submodules; this package imports nothing."""
