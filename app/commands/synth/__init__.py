"""The post-training data commands (each module exports ``COMMANDS``; light imports only)."""
