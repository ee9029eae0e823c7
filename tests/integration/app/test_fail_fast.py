"""Issue 56: every command that reads data says an empty, a binary and a missing input in
one ``Error:`` line before any work: the data commands (curate, dedup, decontam, tokenize,
quality filter and label, tokenizer train, decontam build-index, classifier train, sft
prepare), the crawl's seed list and the training commands' data (given, or named by
the run's config file or overrides). Behaviour only: no clock is read."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from afm.app.cli import main
from tests.paths import CHAT_TOKENIZER


def _inputs(tmp_path: Path) -> dict[str, Path]:
    empty, binary = tmp_path / "empty.jsonl", tmp_path / "binary.jsonl"
    empty.write_bytes(b"")
    binary.write_bytes(bytes(range(256)) * 40)
    return {"empty": empty, "binary": binary, "missing": tmp_path / "missing.jsonl"}


def _config_file(folder: Path, data: Path) -> Path:
    """A run's YAML config naming its training data (``data.paths``) instead of ``--data``."""
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump({"data": {"paths": [str(data)]}}))
    return path


COMMANDS = {
    "curate": lambda x, t: ["curate", "-i", x, "-o", t / "o"],
    "dedup": lambda x, t: ["dedup", "--input", x, "--output", t / "o"],
    "decontam run": lambda x, t: ["decontam", "run", "--index", t / "idx", "--input", x, "--output", t / "o"],
    "tokenize": lambda x, t: ["tokenize", "--input", x, "--tokenizer", CHAT_TOKENIZER, "--output", t / "o"],
    "quality filter": lambda x, t: ["quality", "filter", x, "--output", t / "o", "--no-model"],
    "tokenizer train": lambda x, t: ["tokenizer", "train", "--input", x, "--out", t / "tok", "--vocab-size", "300"],
    "decontam build-index": lambda x, t: ["decontam", "build-index", "--benchmarks", x, "--out", t / "idx2"],
    "classifier train": lambda x, t: ["classifier", "train", "--positives", x, "--negatives", x, "--out",
                                      t / "m.ftz"],
    "crawl": lambda x, t: ["crawl", "--seeds", x, "--out", t / "crawl"],
    "train": lambda x, t: ["train", "--config", "tiny-core", "--workdir", t / "run", "--data", x, "--steps", "1"],
    "train (config file)": lambda x, t: ["train", "--config", _config_file(t, x), "--workdir", t / "run"],
    "sft": lambda x, t: ["sft", "--config", "tiny-sft", "--workdir", t / "run", "--data", x],
    "sft (--set data.paths)": lambda x, t: ["sft", "--config", "tiny-sft", "--workdir", t / "run",
                                            "--set", f"data.paths=[{x}]"],
    "sft prepare": lambda x, t: ["sft", "prepare", "--input", x, "--name", "chat", "--tokenizer", CHAT_TOKENIZER,
                                 "--output", t / "o", "--no-decontam"],
    "quality label": lambda x, t: ["quality", "label", x, "--out", t / "o" / "m.ftz", "--reference", x],
}


@pytest.mark.parametrize("kind", ["empty", "binary", "missing"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_bad_input_is_one_line_before_any_work(command: str, kind: str, tmp_path: Path) -> None:
    x = _inputs(tmp_path)[kind]
    result = CliRunner().invoke(main, [str(a) for a in COMMANDS[command](x, tmp_path)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.output  # nothing printed before it
    assert x.name in lines[0] or "no seed URL" in lines[0] or "0 positive" in lines[0], lines[0]
    assert not (tmp_path / "o").exists() and not (tmp_path / "run").exists()  # no output started
