"""``afm dedup`` on JSONL + Parquet input: Parquet outputs with the shared schemas."""

from __future__ import annotations

import json
import random

import pyarrow.parquet as pq
from click.testing import CliRunner

from afm.app.commands.pipelines.dedup import dedup_command
from afm.io import write_parquet
from afm.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA, from_table, make_document


def test_cli_dedup_jsonl_and_parquet(tmp_path) -> None:
    rng = random.Random(3)
    words = [f"w{i}" for i in range(5000)]
    pages = [" ".join(rng.choices(words, k=150)) for _ in range(10)]
    jsonl = tmp_path / "a.jsonl"
    with jsonl.open("w") as fh:
        for i, page in enumerate(pages):  # only id + text, as the command promises
            fh.write(json.dumps({"id": f"a{i}", "text": page}) + "\n")
    copies = [make_document(p.replace(" ", "  "), url=f"https://b.example/{i}") for i, p in enumerate(pages[:4])]
    write_parquet(copies, tmp_path / "b.parquet")

    out = tmp_path / "out"
    res = CliRunner().invoke(
        dedup_command, ["--input", str(jsonl), str(tmp_path / "b.parquet"), "--output", str(out)]
    )
    assert res.exit_code == 0, res.output
    kept = [r for f in sorted(out.glob("documents-*.parquet")) for r in from_table(pq.read_table(f))]
    rejects = [r for f in sorted(out.glob("rejects-*.parquet")) for r in from_table(pq.read_table(f))]
    assert pq.read_schema(next(out.glob("documents-*.parquet"))).names == DOCUMENT_SCHEMA.names
    assert pq.read_schema(next(out.glob("rejects-*.parquet"))).names == REJECT_SCHEMA.names
    assert len(kept) == 10 and len(rejects) == 4
    assert {r["reason"] for r in rejects} == {"exact_duplicate"}
    kept_ids = {d["id"] for d in kept}
    assert all(json.loads(r["details"])["duplicate_of"] in kept_ids for r in rejects)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"] == {"in": 14, "kept": 10, "rejected": 4}
    assert (out / "_SUCCESS").exists() and "clusters" in res.output

    # A second run into the same directory refuses instead of mixing outputs ...
    again = CliRunner().invoke(dedup_command, ["--input", str(jsonl), "--output", str(out)])
    assert again.exit_code == 1 and "--overwrite" in again.output
    assert "Traceback" not in again.output
    # ... unless told to replace it: then only the new run's files remain.
    again = CliRunner().invoke(dedup_command, ["--input", str(jsonl), "--output", str(out),
                                               "--overwrite"])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "manifest.json").read_text())["totals"]["in"] == 10
    assert not list(out.glob("rejects-*.parquet"))
