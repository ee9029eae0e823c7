"""One module per training method, each a task of the one trainer: its options, its task class and its pure loss functions."""
