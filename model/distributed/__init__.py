"""The device mesh, the sharding rules for parameters and the logical-axis hints on activations.

Import the submodules; this package imports nothing."""
