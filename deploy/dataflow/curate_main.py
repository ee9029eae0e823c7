"""The Dataflow flex template's entry point: the launcher runs this file with the
template's parameters as flags (``--input=gs://... --output=gs://...`` plus Beam's own,
``--runner=DataflowRunner --project=...``), which is exactly ``afm curate``'s command line.

A file of its own, in a folder with no other Python module: a script's folder comes first
on ``sys.path``, so a launcher started inside a package folder would shadow standard
library modules with that folder's (``tokenize.py``, ``inspect.py``).
"""

from afm.app.commands.pipelines.curate import curate_command

if __name__ == "__main__":
    curate_command()
