"""Starting runs: the one front door that turns a stage name or file into a prepared config
and a task (``train.py``), and what needs a task by name on top of the engine: the compiled
memory plan of a run (``memory_plan.py``), ``--batch auto`` / ``--remat auto``
(``autofit.py``) and iTeC rounds, which train committee members (``itec.py``). The top room
of ``training/``: it may use every other room, and none uses it."""
