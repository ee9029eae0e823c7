"""`afm eval --perplexity-data` reads what `afm tokenize` writes: a dataset directory's
tokens-* shards, only once its run finished (the trainer's reader and policy)."""

from __future__ import annotations

import pytest

from afm.evaluation.perplexity import read_token_docs
from afm.training.data.shards import write_token_shard


def test_reads_a_tokenize_directory_and_refuses_an_unfinished_one(tmp_path):
    out = tmp_path / "tokens-heldout"
    rows = [{"id": f"d{i}", "source": "web", "tokens": [5 + i, 6, 7]} for i in range(3)]
    write_token_shard(rows, out / "tokens-00000-of-00001.parquet")
    (out / "manifest.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="_SUCCESS"):
        read_token_docs([str(out)])
    (out / "_SUCCESS").write_text("{}")
    assert read_token_docs([str(out)]) == [("web", [5, 6, 7]), ("web", [6, 6, 7]), ("web", [7, 6, 7])]
    assert read_token_docs([str(out / "tokens-00000-of-00001.parquet")], max_docs=1) == [("web", [5, 6, 7])]
    with pytest.raises(FileNotFoundError, match="not found"):
        read_token_docs([str(tmp_path / "missing")])
