"""Which folders install under which import names, derived from the one area list.

The metadata, dependencies and the ``afm`` script are in ``pyproject.toml``; only the
package layout is computed here, from ``afm/areas.py`` (stdlib-only, read before anything
is installed): every folder of every area, data folders included, so a new subpackage or
data folder can never be left out of the wheel, and setuptools has no folder to warn about.

Two C extensions are built from source with the package: the block extractor's DOM walk
(``filters/extraction/_blockwalk.c``; Python's headers only, lexbor's functions are found at
run time in selectolax's library) and its trees' walk (``filters/extraction/_treewalk.c``).
They are optional: where no C compiler is found the install goes on and the extractor walks
the DOM in Python and the trees in numpy, with the same output.
"""

from __future__ import annotations

import runpy
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
AREAS = runpy.run_path(str(HERE / "afm" / "areas.py"))["AREAS"]
SKIP = {"__pycache__"}


def packages_of(folder: str, package: str) -> list[str]:
    """``package`` and every folder below ``folder`` as a dotted name (data folders too)."""
    root = HERE / folder
    names = [package]
    for sub in sorted(p for p in root.rglob("*") if p.is_dir()):
        rel = sub.relative_to(root).parts
        if not SKIP.intersection(rel) and not any(part.startswith(".") for part in rel):
            names.append(".".join((package, *rel)))
    return names


EXTENSIONS = [
    Extension("afm.filters.extraction._blockwalk", ["filters/extraction/_blockwalk.c"], optional=True),
    Extension("afm.filters.extraction._treewalk", ["filters/extraction/_treewalk.c"], optional=True),
]

setup(
    ext_modules=EXTENSIONS,
    package_dir={area.package: area.folder for area in AREAS},
    packages=[name for area in AREAS for name in packages_of(area.folder, area.package)],
    package_data={"": ["*"]},
    exclude_package_data={"": ["*.pyc"]},
)
