"""The Beam tokenize pipeline: token shards are complete, correct and deterministic."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from afm.io import write_parquet
from afm.model.text.tokenizer import Tokenizer, train_tokenizer
from afm.outputs import OutputError
from afm.pipelines.tokenize import TOKEN_SCHEMA, run_tokenize
from afm.schema import make_document


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    d = tmp_path_factory.mktemp("docs")
    docs = [make_document(f"Document {i}: the crawl found {i * 37} pages in 2024.", url=f"https://e.x/{i}",
                          source="web" if i % 3 else "code") for i in range(60)]
    write_parquet(docs[:40], d / "part-0.parquet")
    lines = [json.dumps({"id": doc["id"], "source": doc["source"], "text": doc["text"]}) for doc in docs[40:]]
    lines.append(json.dumps({"id": "no-text", "source": "web"}))
    lines.append(json.dumps({"id": "empty", "source": "web", "text": ""}))
    (d / "part-1.jsonl").write_text("\n".join(lines) + "\n")
    tok = train_tokenizer([str(d / "part-0.parquet")], d / "tok", vocab_size=300)
    return [str(d / "part-0.parquet"), str(d / "part-1.jsonl")], tok


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("tokens-*"))}


def test_token_shards_are_complete_and_correct(inputs, tmp_path: Path) -> None:
    files, tok_dir = inputs
    stats = run_tokenize(files, tok_dir, tmp_path / "out", shard_docs=25)
    assert stats["documents"] == 60 and stats["skipped"] == 2
    # A record without text is a reader reject; an empty text cannot be tokenized.
    assert stats["skipped_by_reason"] == {"empty_text": 1, "read:missing_text": 1}
    assert stats["documents_in"] == 62 and stats["accounting"]["ok"]
    assert stats["sources"]["code"]["documents"] == 20
    names = sorted(p.name for p in (tmp_path / "out").glob("tokens-*.parquet"))
    assert names == [f"tokens-{i:05d}-of-00003.parquet" for i in range(3)]
    tok = Tokenizer.load(tok_dir)
    rows = []
    for name in names:
        table = pq.read_table(tmp_path / "out" / name)
        assert table.schema.equals(TOKEN_SCHEMA, check_metadata=False)
        shard_rows = table.to_pylist()
        assert [r["id"] for r in shard_rows] == sorted(r["id"] for r in shard_rows)
        rows.extend(shard_rows)
    assert len(rows) == 60 and sum(len(r["tokens"]) for r in rows) == stats["tokens"]
    by_text = {r["id"]: r for r in rows}
    first = pq.read_table(files[0]).to_pylist()[0]
    assert by_text[first["id"]]["tokens"] == tok.encode(first["text"])
    skipped = [json.loads(x) for x in (tmp_path / "out" / "skipped.jsonl").read_text().splitlines()]
    assert {s["id"] for s in skipped} == {"no-text", "empty"}


def test_output_is_deterministic_across_workers(inputs, tmp_path: Path) -> None:
    files, tok_dir = inputs
    run_tokenize(files, tok_dir, tmp_path / "a", shard_docs=25)
    run_tokenize(list(reversed(files)), tok_dir, tmp_path / "b", shard_docs=25, num_workers=2)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    with pytest.raises(OutputError, match="--overwrite"):
        run_tokenize(files, tok_dir, tmp_path / "a", shard_docs=25)


def test_cli_train_then_tokenize(inputs, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from afm.app.commands.model.model import tokenizer_group
    from afm.app.commands.pipelines.tokenize import tokenize_command

    files, _ = inputs
    runner = CliRunner()
    res = runner.invoke(tokenizer_group, ["train", "--input", files[0], "--vocab-size", "300",
                                          "--out", str(tmp_path / "tok")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(tokenize_command, ["--input", *files[:1], "--tokenizer", str(tmp_path / "tok"),
                                           "--output", str(tmp_path / "tokens")])
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "tokens" / "manifest.json").read_text())
    assert manifest["documents"] == 40 and len(manifest["shards"]) == 1
    res = runner.invoke(tokenizer_group, ["train", "--input", files[0], "--vocab-size", "10",
                                          "--out", str(tmp_path / "bad")])
    assert res.exit_code != 0 and "too small" in res.output
