"""The layout shows the architecture, and each job is done once: folder READMEs name every
module, ``training/`` is rooms rather than a flat list, the front page stays a front page
and links the architecture page, the training host needs no pipeline library, and each job is done
in one place: Parquet files opened, SentencePiece loaded, WARC records framed, remote files
opened, module:attr resolved, the stage order; helpers that had a second copy defined once.
(The layer order itself: ``test_layers.py``.)"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from afm.areas import AREAS as LAYERS
from tests.paths import ROOT

AREAS = (*(a.folder for a in LAYERS), "deploy")


def modules(area: str) -> list[Path]:
    return sorted(p for p in (ROOT / area).rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts)


def test_training_is_rooms_not_a_flat_list() -> None:
    top = sorted(p.name for p in (ROOT / "training").glob("*.py"))
    assert len(top) <= 4, top
    rooms = {p.name for p in (ROOT / "training").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert {"core", "data", "tasks", "rl", "compress", "runs"} <= rooms
    assert not rooms & {"commands", "bench", "studies"}  # the app's, in app/


@pytest.mark.parametrize("area", AREAS)
def test_every_module_is_named_in_its_folder_readme(area: str) -> None:
    readme = (ROOT / area / "README.md").read_text()
    missing = [str(p.relative_to(ROOT / area)) for p in modules(area)
               if str(p.relative_to(ROOT / area)) not in readme]
    assert not missing, f"{area}/README.md does not name {missing}"
    assert "add" in readme.lower(), f"{area}/README.md should say where to add things"


TIERS = ("unit", "integration", "slow")
WHOLE_PROJECT = "project"  # tests of the project itself (layers, layout, packaging, named paths)


def test_tests_are_laid_out_like_the_code() -> None:
    """A module's tests are found by its path: every folder of tests under
    ``tests/<tier>/`` is a folder of the code (``tests/unit/pipelines/curate`` tests
    ``pipelines/curate``), and no test sits loose at a tier's top."""
    misplaced = []
    for tier in TIERS:
        base = ROOT / "tests" / tier
        misplaced += [str(t.relative_to(ROOT)) for t in base.glob("test_*.py")]
        for test in base.rglob("test_*.py"):
            rel = test.parent.relative_to(base)
            if rel.parts[0] == WHOLE_PROJECT and tier == "unit":
                continue
            if not (ROOT / rel).is_dir() or rel.parts[0] not in {a.folder for a in LAYERS}:
                misplaced.append(f"{test.relative_to(ROOT)} (no code folder {rel})")
    assert not misplaced, "tests outside the code's layout:\n" + "\n".join(sorted(set(misplaced)))


def test_front_page_is_a_front_page() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert text.index("make demo") < 1500 and "make test" in text[:2000]
    assert "docs/architecture.md" in text
    for where in ("a filter", "a trainer task", "a benchmark", "a stage config", "an eval hook"):
        assert f"**{where}**" in text, where
    linked = [line.split("](", 1)[1].split(")", 1)[0].split("#")[0] for line in text.splitlines() if "](" in line]
    assert [p for p in linked if p and not p.startswith("http") and not (ROOT / p).exists()] == []


def test_experiments_live_outside_the_package() -> None:
    for name in ("rl-arith", "on-device-ablation", "recovery-table", "optimizer-vs-adamw", "mup-lr-sweep"):
        assert (ROOT / "experiments" / name / "README.md").exists(), name
    assert not (ROOT / "experiments" / "__init__.py").exists()


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def _sources(*exclude: str) -> dict[str, str]:
    out = {}
    for area in AREAS:
        for p in modules(area):
            rel = str(p.relative_to(ROOT))
            if rel not in exclude:
                out[rel] = p.read_text()
    return out


def _code_names(source: str) -> set[str]:
    """Every name the code of a module uses (never its docstrings or comments): names,
    attributes, imported modules (``a.b.c`` and its import-from names ``a.b.c.name``) and
    the names imported."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(a.name for a in node.names)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


# Each family of calls has one home: the module that does the job for everyone.
ONE_HOME = {
    "Parquet opened, read or written": ("afm/parquet.py", {
        "pyarrow.parquet", "ParquetFile", "ParquetDataset", "read_table", "read_schema", "read_metadata",
        "ParquetWriter", "write_table"}),
    "SentencePiece loaded or trained": ("model/text/tokenizer.py", {
        "sentencepiece", "SentencePieceProcessor", "SentencePieceTrainer"}),
    "WARC records iterated with warcio": ("afm/readers/warc.py", {"ArchiveIterator", "warcio.archiveiterator"}),
    "files opened through Beam's FileSystems": ("afm/fs.py", {"FileSystems", "apache_beam.io.filesystems"}),
}


@pytest.mark.parametrize("family", sorted(ONE_HOME))
def test_each_family_of_calls_has_one_home(family: str) -> None:
    """Parquet files are opened in ``afm/parquet.py``, SentencePiece is loaded in
    ``model/text/tokenizer.py``, WARC records are framed in ``afm/readers/warc.py`` (the crawler
    keeps warcio for writing), remote files are opened in ``afm/fs.py``: anywhere else a
    name of the family is a second copy of the job (tests excluded)."""
    home, names = ONE_HOME[family]
    found = {f: sorted(_code_names(s) & names) for f, s in _sources(home).items()}
    elsewhere = {f: used for f, used in found.items() if used}
    assert elsewhere == {}, f"{family} outside {home}: {elsewhere}"
    assert _code_names((ROOT / home).read_text()) & names, f"{home} no longer does it: update ONE_HOME"


def test_one_definition_of_each_shared_helper() -> None:
    """Helpers that once had a second copy are defined once (a module-level ``def``)."""
    for name in ("shard_of", "invalid_reject", "write_bytes"):
        where = [f for f, s in _sources().items() if re.search(rf"^def {name}\(", s, re.M)]
        assert len(where) == 1, f"{name} defined in {where}"


def test_one_resolver_no_task_probing() -> None:
    by_hand = [f for f, s in _sources("afm/fs.py").items() if re.search(r"\"://\" (not )?in (path|base|jar|config|text|os\.fspath)", s)]
    assert by_hand == [], f"remote paths tested by hand, not with afm.fs.is_remote: {by_hand}"
    resolvers = [f for f, s in _sources("afm/imports.py", "app/discovery.py", "app/cli.py",
                                        "app/bench/command.py").items() if "import_module(" in s]
    assert resolvers == [], f"module:attr resolved outside afm.imports: {resolvers}"
    probing = [f for f, s in _sources().items() if f.startswith("training/core/")
               and ("getattr(task" in s or "getattr(self.task" in s or "getattr(source" in s)]
    assert probing == []
    engines = [f for f, s in _sources().items() if re.search(r"^class Engine\b", s, re.M)]
    assert engines == ["training/core/engine.py"]


def test_one_stage_order_for_curate_inspect_and_sft_prepare() -> None:
    from afm.pipelines.curate.stages import filter_names, registry
    from afm.synth.prepare import STAGES as PREPARE

    reg = registry()
    web_pages_and_documents = tuple(n for n in reg.order("web") if reg[n].kind in ("page", "document"))
    assert filter_names("web") == web_pages_and_documents  # what `afm inspect` shows, in curate's order
    # sft prepare runs the chat source's stages in the registry's order, around its own steps
    assert tuple(s for s in PREPARE if s in reg) == reg.order("chat")
    assert PREPARE[0] == "read"


def test_model_and_training_import_without_pipeline_libraries(tmp_path: Path) -> None:
    """A training host installs `.[train]` only: every module of model/ and training/ (and
    the trainer's commands) imports with Beam, Scrapy and trafilatura absent."""
    script = """
import importlib, importlib.abc, pkgutil, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"apache_beam", "scrapy", "trafilatura", "datasketch", "warcio"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
count = 0
for root in ("afm.model", "afm.training"):
    package = importlib.import_module(root)
    for info in pkgutil.walk_packages(package.__path__, root + "."):
        importlib.import_module(info.name)
        count += 1
print(count)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.strip()) > 60


def test_tokenize_pipeline_imports_without_jax(tmp_path: Path) -> None:
    """A curate host (Beam, sentencepiece, no JAX) runs ``afm tokenize``: the pipeline and
    the one tokenizer it loads (``model/text/tokenizer.py``) import with the JAX stack absent."""
    script = """
import importlib.abc, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"jax", "jaxlib", "flax", "optax", "orbax", "grain"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
import afm.model.text.tokenizer, afm.pipelines.tokenize
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_paths_relative_to_modules_still_point_at_files() -> None:
    """Modules that find files next to themselves (setup scripts, the checkout, data)
    moved into subfolders: each path still names what exists."""
    from afm.app.commands.deploy.tpu import REPO_ROOT, SETUP_SCRIPT
    from afm.pipelines.beam.portable_cluster import REPO
    from afm.shared_data import CHECKOUT
    from afm.training.core.stages import CONFIG_DIR

    assert SETUP_SCRIPT.is_file() and (REPO_ROOT / "pyproject.toml").is_file()
    assert (REPO / "pyproject.toml").is_file() and any(CONFIG_DIR.glob("*.yaml"))
    assert CHECKOUT == ROOT
