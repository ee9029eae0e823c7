"""Deployment commands (each module exports ``COMMANDS``; light imports only)."""
