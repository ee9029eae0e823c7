"""The evaluation area's commands (each module exports ``COMMANDS``; light imports only)."""
