"""The data-pipeline commands (each module exports ``COMMANDS``; light imports only) and their shared Beam options and error reporting."""
