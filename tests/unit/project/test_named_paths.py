"""Every repository path a file names exists: Dockerfiles, systemd units, deployment and
experiment YAML, the Makefile, CI, READMEs and docs. Paths rot silently when files move
(the Dataflow image once started a launcher file that no longer existed); this test reads
them all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from afm.areas import AREAS
from tests.paths import ROOT

TOP = sorted({a.folder for a in AREAS} | {"deploy", "docs", "experiments", "tests", ".ci"})
# A repository path: a top-level folder, then path characters; a file name ends in an extension.
PATH = re.compile(rf"(?<![\w./-])(?:/opt/afm/)?((?:{'|'.join(map(re.escape, TOP))})/[\w./@-]*[\w/])")
PLACEHOLDER = re.compile(r"[<>{}*$]|\bNAME\b|\.\.\.")
OUTPUTS = ("work/",)


def named_files() -> list[Path]:
    files = [ROOT / "Makefile", ROOT / ".ci" / "run", ROOT / "README.md", ROOT / "setup.py"]
    files += sorted((ROOT / "docs").glob("*.md"))
    files += sorted(p for p in ROOT.rglob("README.md")
                    if not {".venv", "work", "node_modules", ".git"} & set(p.relative_to(ROOT).parts))
    files += sorted((ROOT / "deploy").rglob("*"))
    files += sorted((ROOT / "experiments").rglob("*.yaml"))
    return sorted({p for p in files if p.is_file() and p.suffix not in (".py", ".json") or p.name == "setup.py"})


def names_in(path: Path) -> list[tuple[int, str]]:
    out = []
    for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        for match in PATH.finditer(line):
            name = match.group(1).rstrip(".")
            rest = line[match.end(1):match.end(1) + 1]
            if (PLACEHOLDER.search(name) or rest in ("*", "<", "{", "$") or name.startswith(OUTPUTS)
                    or re.fullmatch(r"\w+/s", name)):  # a rate ("docs/s"), not a path
                continue
            out.append((lineno, name))
    return out


def relative_names(readme: Path) -> list[tuple[int, str]]:
    """Backticked paths in a folder's README that are relative to that folder (``core/task.py``)."""
    out = []
    for lineno, line in enumerate(readme.read_text().splitlines(), 1):
        for match in re.finditer(r"`([\w][\w/.-]*\.(?:py|yaml|yml|json|md|sh|txt|service))`", line):
            name = match.group(1)
            if (("/" in name or name.endswith(".py")) and not name.startswith(tuple(f"{t}/" for t in TOP))
                    and not name.startswith(OUTPUTS + ("WORKDIR/", "../"))):
                out.append((lineno, name))
    return out


FILES = named_files()


def test_the_scan_covers_the_deployment_files() -> None:
    names = {str(p.relative_to(ROOT)) for p in FILES}
    assert {"deploy/dataflow/Dockerfile", "deploy/crawler/Dockerfile", "deploy/crawler/afm-crawler@.service",
            "deploy/crawler/crawler.example.yaml", "Makefile", "README.md"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_file_names_exists(path: Path) -> None:
    missing = [f"{path.relative_to(ROOT)}:{n}: {name}" for n, name in names_in(path) if not (ROOT / name).exists()]
    if path.name == "README.md" and path.parent != ROOT:  # relative to its folder or a folder above
        folders = [path.parent, *[p for p in path.parent.parents if p.is_relative_to(ROOT)]]
        missing += [f"{path.relative_to(ROOT)}:{n}: {name}" for n, name in relative_names(path)
                    if not any((folder / name).exists() for folder in folders)]
    assert not missing, "paths named but absent:\n" + "\n".join(missing)


def test_the_dataflow_image_starts_a_real_entry_point(tmp_path: Path) -> None:
    """The flex template's launcher runs a file of the checkout copied into the image: it is
    copied, and run as a script (from elsewhere, as the launcher does) it is ``afm curate``."""
    import subprocess
    import sys

    docker = (ROOT / "deploy" / "dataflow" / "Dockerfile").read_text()
    (entry,) = re.findall(r"FLEX_TEMPLATE_PYTHON_PY_FILE=/opt/afm/(\S+)", docker)
    copied = [c.rstrip("/") for c in re.findall(r"^COPY (\S+) ", docker, re.M)]
    assert any(entry == c or entry.startswith(c + "/") for c in copied), f"{entry} is not copied into the image"
    done = subprocess.run([sys.executable, str(ROOT / entry), "--help"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Curate crawl output into clean Parquet shards" in done.stdout


@pytest.mark.parametrize("image", ["deploy/dataflow/Dockerfile", "deploy/crawler/Dockerfile"])
def test_an_image_that_installs_afm_copies_every_area(image: str) -> None:
    """``setup.py`` builds the package list from every area of ``afm/areas.py``: an image
    that installs the checkout must copy all of them (and ``setup.py``), not only those it uses."""
    docker = (ROOT / image).read_text()
    copied = {c.rstrip("/") for c in re.findall(r"^COPY (\S+) ", docker, re.M)}
    copied |= {n for line in re.findall(r"^COPY (.+) \./$", docker, re.M) for n in line.split()}
    assert {a.folder for a in AREAS} | {"setup.py", "pyproject.toml"} <= copied, image
