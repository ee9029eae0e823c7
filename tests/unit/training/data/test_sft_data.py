"""SFT batches: whole conversations per row, loss exactly on assistant tokens of the same
conversation, mixture by dataset name, exact and elastic resume, held-out coverage."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from afm.training.data.loader import (
    HeldOutConversations,
    LoaderState,
    conversation_config,
    make_loader,
)
from afm.training.data.shards import DataConfig, DataError

SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("tokens", pa.list_(pa.int32())),
                    ("loss_mask", pa.list_(pa.int8())), ("messages", pa.string())])


def conversation(rng: np.random.Generator, tag: int) -> tuple[list[int], list[int]]:
    """A fake conversation: BOS, prompt tokens, then an assistant reply whose tokens all
    equal ``tag`` (so a row tells which conversation a token came from)."""
    prompt = [1] + rng.integers(10, 50, rng.integers(2, 9)).tolist()
    reply = [tag] * int(rng.integers(1, 7))
    return prompt + reply, [0] * len(prompt) + [1] * len(reply)


def write(path: Path, source: str, n: int, seed: int, first_tag: int, row_group: int = 16) -> dict[int, tuple]:
    rng = np.random.default_rng(seed)
    rows, convs = [], {}
    for i in range(n):
        tag = first_tag + i
        toks, mask = conversation(rng, tag)
        convs[tag] = (toks, mask)
        rows.append({"id": f"{source}{i}", "source": source, "tokens": toks, "loss_mask": mask, "messages": "{}"})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path, row_group_size=row_group)
    return convs


@pytest.fixture()
def shards(tmp_path: Path) -> tuple[list[str], dict[int, tuple]]:
    convs = write(tmp_path / "a.parquet", "math", 60, 0, 100)
    convs |= write(tmp_path / "b.parquet", "chat", 90, 1, 300)
    return [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")], convs


def cfg_for(paths: list[str], **kw) -> DataConfig:
    return DataConfig(paths=paths, seq_len=32, global_batch_size=4, max_segments_per_row=8, lanes=2, **kw)


def SftLoader(cfg: DataConfig, **kw):  # noqa: N802 - the loader SFT runs: whole conversations
    return make_loader(conversation_config(cfg), **kw)


def SftEvalInput(cfg: DataConfig, paths: list[str], **kw):  # noqa: N802
    return HeldOutConversations(conversation_config(cfg), paths, **kw)


def test_rows_hold_whole_conversations_and_score_only_assistant_tokens(shards) -> None:
    paths, convs = shards
    loader = SftLoader(cfg_for(paths))
    for _ in range(6):
        b = next(loader)
        width = b["inputs"].shape[1]
        for r in range(b["inputs"].shape[0]):
            seg = b["segment_ids"][r]
            for s in set(seg.tolist()) - {0}:
                where = np.flatnonzero(seg == s)
                scored = b["targets"][r][where][b["loss_mask"][r][where] > 0]
                tag = int(scored[0])
                full = convs[tag][0]
                # the whole conversation, in one piece: only its last token may sit in the
                # row's extra target slot
                assert b["inputs"][r][where].tolist() == full[: len(where)]
                assert len(where) == len(full) or (len(where) == len(full) - 1 and where[-1] == width - 1)
                assert (b["positions"][r][where] == np.arange(len(where))).all()
                assert set(scored.tolist()) == {tag} and len(scored) == sum(convs[tag][1])
        # loss only where the target is an assistant token of the input's conversation
        scored = b["loss_mask"] > 0
        assert (b["targets"][scored] >= 100).all()
        same = b["segment_ids"][:, 1:] == b["segment_ids"][:, :-1]
        assert not (scored[:, 1:] & ~same).any()


def test_mixture_weights_are_per_conversation(shards) -> None:
    paths, _ = shards
    loader = SftLoader(dataclasses.replace(cfg_for(paths, weights={"math": 0.8, "chat": 0.2}), seq_len=16,
                                           max_segments_per_row=1))
    tags = []
    for _ in range(60):
        b = next(loader)
        tags += [int(b["targets"][r][b["loss_mask"][r] > 0][0]) for r in range(4) if b["loss_mask"][r].any()]
    share = np.mean([t < 300 for t in tags])
    assert 0.7 < share < 0.9
    assert loader.weights == {"chat": 0.2, "math": 0.8}


def test_resume_is_exact_and_elastic(shards) -> None:
    paths, _ = shards
    cfg = cfg_for(paths)
    straight = SftLoader(cfg)
    want = [next(straight) for _ in range(8)]
    first = SftLoader(cfg)
    for _ in range(4):
        next(first)
    state = first.state()
    # same host count
    again = SftLoader(cfg, state=state)
    for k in range(4, 8):
        got = next(again)
        for key in want[k]:
            np.testing.assert_array_equal(got[key], want[k][key])
    # two hosts, each with its lane: together they read the same global rows
    hosts = [SftLoader(cfg, state=state, process_index=i, process_count=2) for i in range(2)]
    for k in range(4, 8):
        parts = [next(h) for h in hosts]
        np.testing.assert_array_equal(np.concatenate([p["inputs"] for p in parts]), want[k]["inputs"])
    merged = LoaderState.merge([h.state() for h in hosts])
    assert merged.lanes.shape == straight.state().lanes.shape


def test_resume_refuses_changed_data(shards, tmp_path: Path) -> None:
    paths, _ = shards
    loader = SftLoader(cfg_for(paths))
    next(loader)
    state = loader.state()
    write(tmp_path / "c.parquet", "math", 5, 3, 900)
    with pytest.raises(DataError, match="sources|differ"):
        SftLoader(cfg_for(paths + [str(tmp_path / "c.parquet")]), state=state)
    with pytest.raises(DataError, match="seq_len"):
        SftLoader(dataclasses.replace(cfg_for(paths), seq_len=64), state=state)


def test_long_conversations_are_truncated_and_counted(tmp_path: Path) -> None:
    rows = [{"id": "x", "source": "s", "tokens": list(range(1, 41)), "loss_mask": [0] * 10 + [1] * 30, "messages": ""}]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp_path / "x.parquet")
    loader = SftLoader(DataConfig(paths=[str(tmp_path / "x.parquet")], seq_len=16, global_batch_size=1, lanes=1))
    b = next(loader)
    assert b["inputs"][0].tolist() == list(range(1, 17)) and loader.truncated == 1


def test_not_an_sft_dataset_is_refused(token_shards: list[str]) -> None:
    with pytest.raises(DataError, match="loss_mask"):
        SftLoader(cfg_for(token_shards))


def test_heldout_covers_every_conversation_once(shards) -> None:
    paths, convs = shards
    ev = SftEvalInput(cfg_for(paths), paths, vocab_size=None)
    n = ev.batches_needed()
    seen: list[int] = []
    for _ in range(n + 2):  # extra batches are padding: no loss
        b = next(ev)
        for r in range(b["targets"].shape[0]):
            for s in set(b["segment_ids"][r].tolist()) - {0}:
                t = b["targets"][r][(b["segment_ids"][r] == s) & (b["loss_mask"][r] > 0)]
                seen += sorted(set(t.tolist()))
    assert sorted(seen) == sorted(convs) and ev.conversations == len(convs)
    expected = sum(sum(m) for _, m in convs.values())
    again = SftEvalInput(cfg_for(paths), paths, vocab_size=None)
    assert sum(float(next(again)["loss_mask"].sum()) for _ in range(n + 2)) == expected
