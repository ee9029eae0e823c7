"""The wheel users install: every subpackage of every area is in it (the package list in
pyproject.toml is explicit, so a new folder is easy to forget), the lab material of
``experiments/`` is not, and every subpackage imports from the installed copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
AREAS = {"afm": "afm", "crawler": "afm.crawler", "filters": "afm.filters", "pipelines": "afm.pipelines",
         "model": "afm.model", "training": "afm.training", "deploy": "afm.deploy",
         "evaluation": "afm.evaluation", "synth": "afm.synth"}


def source_packages() -> dict[str, Path]:
    """Every folder with an ``__init__.py`` under the areas, by its import name."""
    found: dict[str, Path] = {}
    for folder, name in AREAS.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT / folder)
            found[".".join([name, *rel.parts])] = init.parent
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the sources (setuptools writes build/ beside them)."""
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src")
    for name in [*AREAS, "experiments"]:
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True, env={**os.environ, "PIP_NO_INPUT": "1"}, cwd=src, timeout=600,
    )
    (found,) = out.glob("afm-*.whl")
    return found


def test_wheel_holds_every_subpackage_and_no_experiments(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    inits = {n[: -len("/__init__.py")].replace("/", ".") for n in names if n.endswith("/__init__.py")}
    missing = sorted(set(source_packages()) - inits)
    assert not missing, f"subpackages missing from the wheel (add them to pyproject.toml): {missing}"
    assert not [n for n in names if n.startswith("experiments/") or "/experiments/" in n]
    # Package data travels: stage tables, the demo site, the shipped classifier models.
    assert any(n.startswith("afm/training/configs/") and n.endswith(".yaml") for n in names)
    assert "app/demo_site/site.yaml" in names


def test_every_subpackage_imports_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                    str(wheel)], check=True, timeout=600)
    packages = sorted(source_packages())
    script = (
        "import importlib, sys\n"
        f"names = {packages!r}\n"
        "for n in names:\n"
        "    m = importlib.import_module(n)\n"
        f"    assert m.__file__.startswith({str(target)!r}), (n, m.__file__)\n"
        "print(len(names))\n"
    )
    away = tmp_path / "elsewhere"  # not the checkout: nothing may come from the source tree
    away.mkdir()
    done = subprocess.run([sys.executable, "-c", script], cwd=away, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(target)}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.strip()) == len(packages)
