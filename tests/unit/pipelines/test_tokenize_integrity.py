"""Issue 13, observed cases in ``afm tokenize``: ill-typed fields and malformed lines do
not fail the run, one id is tokenized once, and the manifest accounts for every record."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from afm.app.commands.pipelines.tokenize import tokenize_command
from afm.model.text.tokenizer import train_tokenizer


def test_bad_records_are_skipped_with_reasons(tmp_path: Path) -> None:
    clean = tmp_path / "clean.jsonl"
    clean.write_text("".join(json.dumps({"id": f"c{i}", "text": f"plain text number {i} " * 8})
                             + "\n" for i in range(20)))
    tok = train_tokenizer([str(clean)], tmp_path / "tok", vocab_size=300)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("\n".join([
        json.dumps({"id": 7, "text": "integer id " * 5}),
        json.dumps({"id": "t", "text": "numeric title " * 5, "title": 5}),
        json.dumps({"id": "s", "text": "string signals " * 5, "signals": "x"}),
        json.dumps({"id": "u", "text": "lone \ud800 surrogate " * 5}),
        '{"id": "broken", "text": ',
        json.dumps({"id": "dup", "text": "first copy of an id " * 5}),
        json.dumps({"id": "dup", "text": "second copy of the id " * 5}),
    ]) + "\n")
    out = tmp_path / "tokens"
    result = CliRunner().invoke(tokenize_command, ["--input", str(damaged), "--tokenizer",
                                                   str(tok), "--output", str(out)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["documents_in"] == 7 and manifest["accounting"]["ok"]
    assert manifest["skipped_by_reason"] == {"read:bad_json": 1, "duplicate_id": 1}
    ids = [i for f in out.glob("tokens-*.parquet") for i in pq.read_table(f).column("id").to_pylist()]
    assert sorted(ids) == ["7", "dup", "s", "t", "u"]
