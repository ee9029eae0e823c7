"""Every ``afm`` subcommand, one subfolder per area (each module exports ``COMMANDS``)."""
