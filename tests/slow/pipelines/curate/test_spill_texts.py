"""Texts that cross the local runner's shuffles on disk (``output.spill_texts``) change
nothing in what a run keeps, rejects or writes: the same documents, rejects and reasons,
row for row, as a run that carries texts in its records; and the spill files are gone
with the staging directory."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from afm.schema import from_table

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]

# Sentences written for this test; documents are seeded mixes of them, with planted exact
# copies, a near copy, a reused id and a document too short for the quality rules.
SENTENCES = [
    "The village library opened a small workshop where anyone can repair an old bicycle.",
    "Volunteers bring their own tools on Saturday mornings and teach children how to fix a flat tyre.",
    "Last winter the workshop rebuilt more than forty bicycles that had been left in sheds and garages.",
    "Most of them were given to students who travel to the secondary school in the next town.",
    "The head librarian says the idea came from a reader who could not afford a new chain for his bike.",
    "Since then the council has offered a room behind the library and a grant for spare parts.",
    "A retired engineer keeps a notebook with the history of every frame that passes through the door.",
    "Some of the frames are older than the people who now ride them to work every day.",
    "On warm evenings the group rides together along the canal path and checks the repaired brakes.",
    "Parents say their children have learned patience, because a wheel rarely runs true on the first try.",
    "The workshop also collects old lights and reflectors, which are cleaned and fitted before winter.",
    "Next year the volunteers hope to open a second workshop in the community hall by the river.",
]


def _documents(path: Path, n: int = 24) -> Path:
    rng = random.Random(7)
    rows = []
    for i in range(n):
        picked = rng.sample(SENTENCES, 8)
        rows.append({"id": f"doc-{i}", "text": " ".join(picked) + f" This is note number {i} of the series."})
    rows.append({"id": "copy-a", "text": rows[3]["text"]})  # exact copy, another id
    rows.append({"id": "copy-b", "text": rows[3]["text"].replace("series.", "series!")})  # near copy
    rows.append({"id": "doc-5", "text": rows[6]["text"]})  # a reused id
    rows.append({"id": "short", "text": "Too short."})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _rows(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for f in files for r in from_table(pq.read_table(f["path"]))]


def _run(docs: Path, out: Path, spill: str) -> dict[str, Any]:
    from afm.pipelines.curate.pipeline import run_curate

    config = {"decontaminate": {"enabled": False}, "output": {"spill_texts": spill}}
    manifest = run_curate([str(docs)], out, config=config, pipeline_args=LOCAL, quiet=True)
    return {"manifest": manifest, "docs": _rows(manifest["outputs"]["documents"]),
            "rejects": _rows(manifest["outputs"]["rejects"])}


@pytest.mark.slow  # two curate runs; every curate test in `make test` runs with spill files
def test_spilled_texts_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from afm.pipelines.beam import spill

    docs = _documents(tmp_path / "docs.jsonl")
    plain = _run(docs, tmp_path / "plain", "never")
    written: list[str] = []
    stowed_by: list[str] = []
    places: set[spill.Location] = set()
    put, stow_field = spill.SpillWriter._put, spill.SpillWriter._stow_field

    def counting_put(self: spill.SpillWriter, data: bytes, chars: int) -> spill.Location:
        location = put(self, data, chars)
        written.append(location[0])
        return location

    def counting_stow(self: spill.SpillWriter, rec: dict[str, Any], name: str) -> dict[str, Any]:
        out = stow_field(self, rec, name)
        if name == "text" and out is not rec:
            stowed_by.append(Path(self.directory).name)
            places.add(out[spill.STOWED])
        return out

    monkeypatch.setattr(spill.SpillWriter, "_put", counting_put)
    monkeypatch.setattr(spill.SpillWriter, "_stow_field", counting_stow)
    spilled = _run(docs, tmp_path / "spilled", "always")

    # Every shuffle that carries documents stowed their texts (the in-process runner runs
    # the DoFns here): the documents read (before one per id), the dedup join, the shard
    # writers. A text read back and stowed again unchanged keeps its place: fewer writes.
    assert {"read", "dedup", "documents", "rejects"} <= set(stowed_by), set(stowed_by)
    assert len(places) < len(stowed_by)
    assert spilled["manifest"]["totals"] == plain["manifest"]["totals"]
    assert spilled["manifest"]["accounting"]["ok"]
    assert spilled["docs"] == plain["docs"] and spilled["docs"]
    assert spilled["rejects"] == plain["rejects"]
    reasons = {r["reason"] for r in spilled["rejects"]}
    assert {"duplicate_id", "exact_duplicate"} <= reasons, reasons
    assert not any(Path(p).exists() for p in written), "spill files must go with the staging directory"
    assert not list((tmp_path / "spilled").glob(".*"))
