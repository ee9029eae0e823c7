"""``python -m afm.app``: the ``afm`` command, for a process started without the script on
its PATH (benchmarks and tests run the command in a fresh interpreter this way)."""

from afm.app.cli import main

main()
