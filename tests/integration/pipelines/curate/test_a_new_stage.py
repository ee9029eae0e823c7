"""Adding a curate filter is one module plus one registry entry (filters/README.md): a filter
written here from scratch, registered in a scratch copy of the stage registry, runs through
``afm curate`` (typed parameters from ``--set``, the funnel, the rejects, the advice, the
report) and ``afm inspect``, with nothing else edited."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from afm.app.commands.filters.inspect import inspect_cmd
from afm.app.commands.pipelines.curate import curate_command
from afm.pipelines.curate.stages import REGISTRY, Stage, using

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]

FILTER = '''
"""A filter of our own: pages written in capitals are shouting, not prose."""
from dataclasses import dataclass

from afm.filters.base import Decision


@dataclass
class ShoutConfig:
    max_upper_ratio: float = 0.5  # share of letters in capitals above which a text shouts
    min_letters: int = 20

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_upper_ratio <= 1.0:
            raise ValueError("max_upper_ratio must be in [0, 1]")


class ShoutFilter:
    name = "shout"

    def __init__(self, cfg: ShoutConfig) -> None:
        self.cfg = cfg

    def __call__(self, doc):
        letters = [c for c in doc["text"] if c.isalpha()]
        ratio = sum(c.isupper() for c in letters) / max(1, len(letters))
        if len(letters) >= self.cfg.min_letters and ratio > self.cfg.max_upper_ratio:
            return Decision.drop("shouting", {"upper_ratio": ratio}, score=ratio,
                                 threshold=self.cfg.max_upper_ratio)
        return Decision(True, signals={"upper_ratio": ratio})
'''

TOPICS = ["the river walk past the old mill", "the bakery that opened on the square",
          "the library's new reading room", "the cycling club's autumn ride",
          "the school choir's winter concert", "the harbour's restored lighthouse",
          "the allotments behind the station", "the museum's exhibition of maps"]


def text(i: int) -> str:
    """Prose of its own per document (dedup keeps them all), about one of the topics."""
    topic = TOPICS[i]
    return (f"Last week we visited {topic}. Everyone we met had a story about {topic}, "
            f"and several of them had known it for more than {10 + 7 * i} years. "
            f"We plan to write a longer piece about {topic} once the season changes, with "
            f"photographs taken on {['Monday', 'Tuesday', 'Friday', 'Sunday'][i % 4]} morning. ") * 2


@pytest.fixture
def shout_registry(tmp_path: Path, monkeypatch):
    """The one module, importable by the run (in this process and any worker it starts),
    and the one registry entry, in a scratch copy of the registry."""
    package = tmp_path / "plugins"
    package.mkdir()
    (package / "shout_filter.py").write_text(textwrap.dedent(FILTER))
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.setenv("PYTHONPATH", str(package))
    scratch = REGISTRY.copy()
    scratch.register(Stage(
        "shout", "document", "shout_filter:ShoutFilter", "shout_filter:ShoutConfig",
        "texts written in capitals", sources=("web",), needs=("extract",),
        advice="--set shout.params.max_upper_ratio=0.9 (share of capitals allowed)",
    ), before="language")  # language ID reads shouting as no language at all
    with using(scratch):
        yield scratch
    assert "shout" not in REGISTRY  # the scratch copy never touched the registry in use


def _docs(path: Path) -> Path:
    rows = [{"id": f"calm{i}", "text": text(i)} for i in range(5)]
    rows += [{"id": f"loud{i}", "text": text(i).upper()} for i in range(5, 8)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_new_stage_runs_through_curate_inspect_and_the_report(tmp_path: Path, shout_registry) -> None:
    assert shout_registry.order("web")[1:4] == ("extract", "shout", "language")
    src, out = _docs(tmp_path / "docs.jsonl"), tmp_path / "out"
    result = CliRunner().invoke(curate_command, [
        "--input", str(src), "--output", str(out), "--set", "decontaminate.enabled=false",
        "--set", "quality.enabled=false", "--set", "quality_model.enabled=false",
        "--set", "shout.params.max_upper_ratio=0.6", *LOCAL])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    funnel = {f["stage"]: f for f in manifest["funnel"]}
    assert funnel["shout"]["in"] == 8 and funnel["shout"]["dropped"] == 3
    assert funnel["shout"]["reasons"] == {"shouting": 3}
    assert manifest["config"]["shout"]["params"] == {"max_upper_ratio": 0.6}  # typed: a number
    (shout,) = [s for s in manifest["stages"] if s["stage"] == "shout"]
    assert shout["status"] == "ready" and shout["config"] == {"max_upper_ratio": 0.6, "min_letters": 20}
    rejects = pq.read_table(out / "rejects-00000.parquet").to_pylist()
    loud = [r for r in rejects if r["rejected_by"] == "shout"]
    assert sorted(r["id"] for r in loud) == ["loud5", "loud6", "loud7"]
    assert json.loads(loud[0]["details"])["threshold"] == 0.6
    kept = pq.read_table(out / "documents-00000.parquet").to_pylist()
    assert all(0 < dict(d["signals"])["shout.upper_ratio"] < 0.6 for d in kept) and len(kept) == 5
    advice = " ".join(a["line"] for a in manifest["rejected_most"])
    assert "shout: 3 rejected" in advice and "shout.params.max_upper_ratio=0.9" in advice
    report = (out / "report.html").read_text()
    assert "<td>shout</td>" in report and "shouting" in report

    page = tmp_path / "loud.txt"
    page.write_text(text(7).upper())
    shown = CliRunner().invoke(inspect_cmd, [str(page), "--json"])
    assert shown.exit_code == 0, shown.output
    decisions = json.loads(shown.stdout)["decisions"]
    assert [d["filter"] for d in decisions][:2] == ["shout", "language"]  # in curate's order
    decision = decisions[0]
    assert decision["filter"] == "shout" and not decision["keep"] and decision["reason"] == "shouting"
    assert decision["details"] == {"score": pytest.approx(decision["signals"]["upper_ratio"]), "threshold": 0.5}


def test_a_new_stages_parameters_are_checked_before_any_work(tmp_path: Path, shout_registry) -> None:
    src = _docs(tmp_path / "docs.jsonl")
    for setting, message in (("shout.params.max_upper_ratio=loud", "shout.params.max_upper_ratio"),
                             ("shout.params.max_upper_ratio=2", "max_upper_ratio must be in"),
                             ("shout.params.max_ratio=0.5", "unknown keys ['max_ratio']")):
        result = CliRunner().invoke(curate_command, [
            "--input", str(src), "--output", str(tmp_path / "out"), "--set", setting,
            "--set", "decontaminate.enabled=false", *LOCAL])
        assert result.exit_code != 0 and message in result.output, result.output
        assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
