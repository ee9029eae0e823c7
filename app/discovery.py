"""How the app finds its commands and benchmarks: by folder, not by a hand-kept list.

``app/commands/<area>/`` and ``app/bench/<area>/`` hold one subfolder per area; every module
there exporting ``COMMANDS`` (click commands) or ``BENCHMARKS`` (name -> function) is
picked up, so adding one is adding a file.
"""

from __future__ import annotations

import importlib
import pkgutil

from afm.areas import AREAS


def app_modules(folder: str) -> list[str]:
    """The modules of the app's ``folder`` (``commands`` or ``bench``): its subfolders in
    area order (any other subfolder, such as ``deploy``, after them), sorted within one.
    Two people adding commands to different areas never edit the same registry."""
    package = importlib.import_module(f"afm.app.{folder}")
    rooms = [info.name for info in pkgutil.iter_modules(package.__path__) if info.ispkg]
    order = [a.folder for a in AREAS]
    rooms.sort(key=lambda r: (order.index(r) if r in order else len(order), r))
    names: list[str] = []
    for room in rooms:
        sub = importlib.import_module(f"{package.__name__}.{room}")
        for info in sorted(pkgutil.iter_modules(sub.__path__), key=lambda i: i.name):
            if not info.ispkg and not info.name.startswith("_"):
                names.append(f"{sub.__name__}.{info.name}")
    return names
