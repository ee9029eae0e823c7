"""The wheel users install: every folder of every area is in it (the package list is built
from ``afm/areas.py`` by ``setup.py``, so a new subpackage or data folder cannot be left
out), building it prints no setuptools warning, the lab material of ``experiments/`` is
not in it, every subpackage imports from the installed copy, and the commands that read the
shipped data folders work from that copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from afm.areas import AREAS
from tests.paths import ROOT

PAGE = ("<html><head><title>Library budget</title></head><body><article>"
        + "<p>The city council approved the new library budget on Tuesday after a long debate, and "
          "construction will start in the spring with the doors opening in two years.</p>" * 4
        + "<p>Solve 3x + 2 = 11, so x = 3.</p></article></body></html>")
ECHO_GENERATOR = """from afm.synth.generators import Generation


def make(**_):
    class Echo:
        name = "echo"

        def generate(self, requests, on_result=None):
            out = []
            for i, request in enumerate(requests):
                n = getattr(request, "n", 1)
                out.append(Generation(texts=["The answer is 4.\\n#### 4"] * n, finish=["stop"] * n))
                if on_result is not None:
                    on_result(i, out[-1])
            return out

    return Echo()
"""
EVAL_DATA = (
    "from afm.evaluation.posttrain.bfcl.data import load as bfcl\n"
    "from afm.evaluation.posttrain.safety.data import load as safety\n"
    "from afm.evaluation.posttrain.writing.data import load_graded\n"
    "from afm.evaluation.suite import prepare_demo_data\n"
    "from afm.evaluation.tiny import tokenizer_dir\n"
    "from afm.model.text.tokenizer import Tokenizer\n"
    "import os, sys, tempfile\n"
    "demo = prepare_demo_data(tempfile.mkdtemp())\n"
    "print('bfcl', len(bfcl('bfcl_simple', None).entries), 'safety', len(safety('safety_xstest', None).items),\n"
    "      'writing', len(load_graded(None).items), 'tokenizer', Tokenizer.load(tokenizer_dir()).vocab_size,\n"
    "      'demo', len(os.listdir(demo)))\n"
)
# Each data folder the code reads (in the wheel: afm/<area>/...), and a command that reads it
# from the installed copy: (arguments of python, what its output holds).
DATA_COMMANDS: dict[str, tuple[list[str], str]] = {
    "afm/training/configs": (["-m", "afm.app", "train", "--list-configs"], "tiny-mdloo"),
    "afm/synth/data": (["-m", "afm.app", "synth", "math", "--output", "synth-out", "--generator",
                        "afm_echo_generator:make", "--no-cache", "--samples", "1"], "/10 problems"),
    "afm/filters/data/extraction": (["-m", "afm.app", "inspect", "page.html", "--json"], '"filter": "extract"'),
    "afm/filters/data/safety": (["-m", "afm.app", "inspect", "page.html", "--json"], '"filter": "safety"'),
    "afm/filters/data/quality": (["-m", "afm.app", "inspect", "page.html", "--json", "--with", "quality_model"], '"filter": "quality_model"'),
    "afm/filters/data/math": (["-m", "afm.app", "inspect", "page.html", "--json", "--source", "math"],
                              '"filter": "math"'),
    "afm/filters/data/benchmarks": (["-m", "afm.app", "decontam", "build-index", "--benchmarks", "demo",
                                     "--out", "decontam-index"], "decontam-index"),
    "afm/evaluation/data": (["-c", EVAL_DATA], "tokenizer 512"),
    "afm/app/demo_site": (["-c", "from afm.app.demosite import render_site; print(len(render_site()), 'hosts')"],
                          "hosts"),
}


def source_packages() -> dict[str, Path]:
    """Every folder with an ``__init__.py`` under the areas, by its import name."""
    found: dict[str, Path] = {}
    for area in AREAS:
        for init in sorted((ROOT / area.folder).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT / area.folder)
            found[".".join([area.package, *rel.parts])] = init.parent
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    """The wheel built from a copy of the sources (setuptools writes build/ beside them),
    and what the build printed."""
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src")
    for area in AREAS:
        shutil.copytree(ROOT / area.folder, src / area.folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "experiments", src / "experiments", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        capture_output=True, text=True, env={**os.environ, "PIP_NO_INPUT": "1"}, cwd=src, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (found,) = out.glob("afm-*.whl")
    return found, done.stdout + done.stderr


def test_building_prints_no_setuptools_warning(built) -> None:
    _, log = built
    assert "would be ignored" not in log and "SetuptoolsDeprecationWarning" not in log
    assert "warning" not in log.lower().replace("no-warn", ""), log[-3000:]


def test_wheel_holds_every_subpackage_and_data_folder_and_no_experiments(built) -> None:
    wheel, _ = built
    names = zipfile.ZipFile(wheel).namelist()
    inits = {n[: -len("/__init__.py")].replace("/", ".") for n in names if n.endswith("/__init__.py")}
    missing = sorted(set(source_packages()) - inits)
    assert not missing, f"subpackages missing from the wheel: {missing}"
    assert not [n for n in names if n.startswith("experiments/") or "/experiments/" in n]
    for area in AREAS:  # every file of every data folder travels
        for path in (ROOT / area.folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                rel = path.relative_to(ROOT / area.folder)
                name = "/".join(["afm", *([] if area.folder == "afm" else [area.folder]), *rel.parts])
                assert name in names, f"{name} is not in the wheel"
    data_folders = {n.rsplit("/", 1)[0] for n in names if not n.endswith((".py", ".pyc")) and "/data/" in n}
    read = [d for d in data_folders if not any(d == f or d.startswith(f + "/") for f in DATA_COMMANDS)]
    assert not read, f"data folders no command of this test reads from the installed copy: {read}"


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> Path:
    wheel, _ = built
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, timeout=600)
    return target


def _run_installed(target: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    (cwd / "page.html").write_text(PAGE)
    (cwd / "afm_echo_generator.py").write_text(ECHO_GENERATOR)  # a stand-in model for afm synth
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(cwd)]), "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


def test_every_subpackage_imports_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    packages = sorted(source_packages())
    script = (
        "import importlib, sys\n"
        f"names = {packages!r}\n"
        "for n in names:\n"
        "    m = importlib.import_module(n)\n"
        f"    assert m.__file__.startswith({str(installed)!r}), (n, m.__file__)\n"
        "print(len(names))\n"
    )
    done = _run_installed(installed, ["-c", script], tmp_path)  # not the checkout: nothing from the source tree
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.strip()) == len(packages)


@pytest.mark.parametrize("folder", sorted(DATA_COMMANDS))
def test_the_commands_read_each_data_folder_from_the_installed_copy(installed: Path, tmp_path: Path,
                                                                   folder: str) -> None:
    args, expected = DATA_COMMANDS[folder]
    done = _run_installed(installed, args, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert expected in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
