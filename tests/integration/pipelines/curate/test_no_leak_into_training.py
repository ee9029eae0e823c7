"""Issue 13: what curate rejected can never be trained on.

Observed: ``afm tokenize --input CURATE_OUT/`` (the README's own usage) tokenized
``rejects-*.parquet`` too, so benchmark-contaminated documents that curate rejected ended
up in the token shards; ``afm tokenizer train --input CURATE_OUT/`` trained on rejects.
Here a contaminated document is planted, shown to be in the rejects, and shown not to
be in the tokens, whose ids are exactly the ids of ``documents-*``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from afm.app.commands.model.model import tokenizer_group
from afm.app.commands.pipelines.curate import curate_command
from afm.app.commands.pipelines.tokenize import tokenize_command

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def _ids(files: list[Path]) -> list[str]:
    return [i for f in files for i in pq.read_table(f, columns=["id"]).column("id").to_pylist()]


def test_rejected_documents_never_reach_tokens(tmp_path: Path, demo_index: Path) -> None:
    from afm.filters.benchmarks import demo_items

    question = demo_items()[0]["question"]
    docs = [{"id": f"clean-{i}", "text": f"Notes from the allotment, week {i}: the beans are "
             "up, the slugs are back, and the rain barrel is full again. " * 4} for i in range(30)]
    docs.append({"id": "contaminated", "text": f"Homework help for parents. {question} "
                 "Draw the trays first, then count what is left."})
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    corpus = tmp_path / "corpus"
    runner = CliRunner()
    result = runner.invoke(curate_command, ["--input", str(src), "--output", str(corpus),
                                            "--decontam-index", str(demo_index),
                                            "--set", 'stages=["decontaminate"]', *LOCAL])
    assert result.exit_code == 0, result.output
    rejects = _ids(sorted(corpus.glob("rejects-*.parquet")))
    documents = _ids(sorted(corpus.glob("documents-*.parquet")))
    assert rejects == ["contaminated"] and len(documents) == 30

    result = runner.invoke(tokenizer_group, ["train", "--input", str(corpus), "--vocab-size",
                                             "300", "--out", str(tmp_path / "tok")])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "tok" / "tokenizer_meta.json").read_text())
    assert meta["docs_seen"] == 30  # documents only: the reject was not trained on

    result = runner.invoke(tokenize_command, ["--input", str(corpus), "--tokenizer",
                                              str(tmp_path / "tok"), "--output",
                                              str(tmp_path / "tokens")])
    assert result.exit_code == 0, result.output
    tokens = _ids(sorted((tmp_path / "tokens").glob("tokens-*.parquet")))
    assert sorted(tokens) == sorted(documents)
    assert "contaminated" not in tokens
    manifest = json.loads((tmp_path / "tokens" / "manifest.json").read_text())
    assert any("rejects-00000.parquet" in s for s in manifest["skipped_inputs"])
    assert (tmp_path / "tokens" / "_SUCCESS").exists()

    # A curate output whose run did not finish (no _SUCCESS) is refused, saying why.
    (corpus / "_SUCCESS").unlink()
    for command, args in ((tokenize_command, ["--tokenizer", str(tmp_path / "tok"), "--output",
                                              str(tmp_path / "tokens2")]),
                          (tokenizer_group, ["train", "--vocab-size", "300", "--out",
                                             str(tmp_path / "tok2")])):
        argv = (args[:1] if command is tokenizer_group else []) + ["--input", str(corpus)] + \
            (args[1:] if command is tokenizer_group else args)
        result = runner.invoke(command, argv)
        assert result.exit_code != 0 and "_SUCCESS" in result.output, result.output
        assert "Traceback" not in result.output
