"""The crawler's commands (each module exports ``COMMANDS``; light imports only)."""
