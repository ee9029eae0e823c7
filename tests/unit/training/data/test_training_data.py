"""Streaming token loader: index, packing, masks, mixture, exact and elastic resume."""

from __future__ import annotations

import numpy as np
import pytest

from afm.training.data.loader import LoaderState, default_lanes, make_loader
from afm.training.data.shards import (
    DataConfig,
    DataError,
    ShardIndex,
    expand_paths,
    mixture_weights,
    write_token_shard,
)


def _cfg(paths, **kw):
    base = dict(paths=paths, seq_len=32, global_batch_size=4, weights={"web": 0.5, "code": 0.3, "math": 0.2}, prefetch=0)
    base.update(kw)
    return DataConfig(**base)


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_index_keeps_chunks_not_documents(tmp_path, token_shards):
    index = ShardIndex(expand_paths(token_shards))
    assert index.documents == {"code": 80, "math": 80, "web": 80}
    assert all(c.mixed for chunks in index.chunks.values() for c in chunks)  # i % 3 sources
    # a row group holding one source is recognised from its statistics alone
    pure = write_token_shard([{"id": str(i), "source": "web", "tokens": [5, 6]} for i in range(10)],
                             tmp_path / "pure.parquet", row_group_size=4)
    pure_index = ShardIndex([pure])
    assert [(c.rows, c.mixed) for c in pure_index.chunks["web"]] == [(4, False), (4, False), (2, False)]
    offsets, values = pure_index.read(pure_index.chunks["web"][2], "web")
    assert offsets.tolist() == [0, 2, 4] and values.tolist() == [5, 6, 5, 6]


def test_index_cache_is_used_and_refreshed(tmp_path, token_shards, monkeypatch):
    import pyarrow.parquet as pq

    cache = str(tmp_path / "index.json")
    built = ShardIndex(expand_paths(token_shards), cache=cache)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", lambda *a, **k: pytest.fail("read despite the cache"))
    loaded = ShardIndex(expand_paths(token_shards), cache=cache)
    assert loaded.chunks == built.chunks and loaded.fingerprint == built.fingerprint
    monkeypatch.undo()
    extra = write_token_shard([{"id": "z", "source": "web", "tokens": [5, 6, 7]}], tmp_path / "more.parquet")
    grown = ShardIndex([*expand_paths(token_shards), extra], cache=cache)  # stale cache: rebuilt
    assert grown.documents["web"] == built.documents["web"] + 1
    (tmp_path / "index.json").write_text("{not json")
    assert ShardIndex(expand_paths(token_shards), cache=cache).chunks == built.chunks


def test_packing_shift_eos_segments_and_loss_mask(token_shards):
    b = next(make_loader(_cfg(token_shards, seq_len=128), vocab_size=512))
    assert b["inputs"].shape == (4, 128) and b["inputs"].dtype == np.int32
    np.testing.assert_array_equal(b["inputs"][:, 1:], b["targets"][:, :-1])
    seg, pos, mask, inp = b["segment_ids"], b["positions"], b["loss_mask"], b["inputs"]
    boundaries = 0
    for r in range(4):
        assert pos[r, 0] == 0 and seg[r, 0] == 1
        for t in range(1, 128):
            if seg[r, t] != seg[r, t - 1]:
                boundaries += 1
                assert seg[r, t] == seg[r, t - 1] + 1  # contiguous runs
                assert pos[r, t] == 0  # positions restart per document
                assert inp[r, t - 1] == 2  # EOS closes the previous document
                assert mask[r, t - 1] == 0  # EOS -> next doc's first token is not scored
            else:
                assert pos[r, t] == pos[r, t - 1] + 1
    assert boundaries > 0


def test_causal_mode_and_unmasked_boundaries(token_shards):
    b = next(make_loader(_cfg(token_shards, attention="causal", mask_cross_document_loss=False), vocab_size=512))
    assert (b["segment_ids"] == 1).all() and (b["loss_mask"] == 1).all()
    np.testing.assert_array_equal(b["positions"][0], np.arange(32))


def test_max_segments_per_row_pads_the_rest(token_shards):
    b = next(make_loader(_cfg(token_shards, seq_len=256, max_segments_per_row=2), vocab_size=512))
    assert b["segment_ids"].max() <= 2
    padded = b["segment_ids"] == 0
    assert padded.any()  # docs are 5-120 tokens: two do not fill 256
    assert (b["loss_mask"][padded] == 0).all() and (b["inputs"][padded] == 0).all()


def test_resume_from_state_gives_identical_batches(token_shards):
    cfg = _cfg(token_shards)
    p = make_loader(cfg, vocab_size=512)
    for _ in range(5):
        next(p)
    state = p.state()
    expected = [next(p) for _ in range(4)]
    q = make_loader(cfg, vocab_size=512, state=state)
    for e in expected:
        _same(e, next(q))


def test_prefetch_keeps_exact_resume(token_shards):
    p = make_loader(_cfg(token_shards, prefetch=4), vocab_size=512)
    for _ in range(3):
        next(p)
    state = p.state()
    expected = [next(p) for _ in range(3)]
    p.close()
    q = make_loader(_cfg(token_shards), vocab_size=512, state=state)
    for e in expected:
        _same(e, next(q))


@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 2), (4, 2)])
def test_elastic_resume_on_another_host_count(token_shards, before, after):
    """N hosts -> M hosts: the remaining global batches are exactly the uninterrupted ones."""
    cfg = _cfg(token_shards, global_batch_size=8, lanes=4)

    def hosts(n, state=None):
        return [make_loader(cfg, vocab_size=512, process_index=i, process_count=n, state=state) for i in range(n)]

    def global_batch(loaders):
        parts = [next(h) for h in loaders]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    reference = hosts(1)
    old = hosts(before)
    for _ in range(3):
        _same(global_batch(reference), global_batch(old))  # host count never changes the data
    merged = LoaderState.merge([h.state() for h in old])
    assert merged.lanes.shape[0] == 4 and merged.lanes[:, 0].tolist() == [0, 1, 2, 3]
    new = hosts(after, merged)
    for _ in range(5):
        _same(global_batch(reference), global_batch(new))


def test_state_checks_and_lane_choice(token_shards):
    p = make_loader(_cfg(token_shards), vocab_size=512)
    next(p)
    with pytest.raises(DataError, match="seq_len"):
        make_loader(_cfg(token_shards, seq_len=16), vocab_size=512, state=p.state())
    with pytest.raises(DataError, match="differ"):
        make_loader(_cfg(token_shards[:1]), vocab_size=512, state=p.state())
    with pytest.raises(DataError, match="lanes"):
        make_loader(_cfg(token_shards, global_batch_size=8, lanes=4), vocab_size=512, process_count=8)
    assert default_lanes(4096, 1) == 64 and default_lanes(4096, 16) == 128 and default_lanes(8, 2) == 8


def test_mixture_weights_follow_config(token_shards, monkeypatch):
    assert mixture_weights({"web": 10, "code": 5, "x": 3}, {"web": 3.0, "code": 1.0, "math": 9.0}) == {
        "code": 0.25,
        "web": 0.75,
    }
    assert mixture_weights({"web": 30, "code": 10}, {}) == {"code": 0.25, "web": 0.75}
    # realised document draws follow the weights
    from afm.training.data import loader as loader_module

    drawn: list[int] = []
    original = loader_module._Lane._draw_source

    def counting(self):
        drawn.append(original(self))
        return drawn[-1]

    monkeypatch.setattr(loader_module._Lane, "_draw_source", counting)
    p = make_loader(_cfg(token_shards, seq_len=64, weights={"web": 0.8, "code": 0.2}), vocab_size=512)
    for _ in range(100):
        next(p)
    assert p.sources == ["code", "web"] and len(drawn) > 300
    assert abs(np.mean(np.asarray(drawn) == 1) - 0.8) < 0.06


def test_each_row_group_is_decoded_once_per_epoch(token_shards, monkeypatch):
    cfg = _cfg(token_shards, weights={"web": 1.0}, global_batch_size=1, seq_len=64)
    p = make_loader(cfg, vocab_size=512)
    calls = []
    original = p.index.read
    monkeypatch.setattr(p.index, "read", lambda chunk, source: calls.append(chunk) or original(chunk, source))
    web_tokens = sum(int(p.index.read(c, "web")[0][-1]) + int(c.rows) for c in p.index.chunks["web"])
    calls.clear()
    for _ in range(web_tokens // 65 - 1):
        next(p)
    assert sorted(calls, key=lambda c: (c.file, c.row_group)) == sorted(p.index.chunks["web"], key=lambda c: (c.file, c.row_group))


def test_bad_inputs_fail_clearly(tmp_path, token_shards):
    with pytest.raises(DataError, match="not found"):
        expand_paths([str(tmp_path / "missing.parquet")])
    bad = write_token_shard([{"id": "a", "source": "web", "tokens": [5, 900]}], tmp_path / "bad.parquet")
    p = make_loader(_cfg([bad], seq_len=4, global_batch_size=1, weights={}), vocab_size=512)
    with pytest.raises(DataError, match="out of range"):
        next(p)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a"], "text": ["x"]}), tmp_path / "text.parquet")
    with pytest.raises(DataError, match="missing column"):
        make_loader(_cfg([str(tmp_path / "text.parquet")]), vocab_size=512)
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="not a readable Parquet"):
        make_loader(_cfg([str(tmp_path / "junk.parquet")]), vocab_size=512)
    from afm.config import ConfigError

    with pytest.raises(ConfigError, match="data.attention must be one of"):  # refused when the config is made
        make_loader(_cfg(token_shards, attention="bidirectional"), vocab_size=512)


def test_paths_local_globs_dirs_and_remote_rules(tmp_path, token_shards):
    from afm import fs

    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    (nested / "x.parquet").write_bytes(b"")
    (tmp_path / "a" / "y.parquet").write_bytes(b"")
    (tmp_path / "a" / "notes.txt").write_text("")
    files, missing = fs.expand([str(tmp_path / "a" / "**" / "*.parquet"), str(tmp_path / "gone")], ".parquet")
    assert [f.split("/")[-1] for f in files] == ["x.parquet", "y.parquet"] and missing == [str(tmp_path / "gone")]
    assert fs.expand([str(tmp_path / "a")], ".parquet")[0] == files  # a directory is recursive
    assert fs.is_remote("gs://bucket/x") and not fs.is_remote(str(tmp_path))
    # one rule for every reader and writer: any scheme but file:// is remote
    assert fs.is_remote("hdfs://namenode/x") and fs.is_remote("s3://b/x") and not fs.is_remote(f"file://{tmp_path}")
    assert fs.expand([f"file://{tmp_path / 'a'}"], ".parquet")[0] == files and fs.isdir(f"file://{tmp_path}")
    assert str(fs.as_path("gs://bucket/runs/x")) == "gs://bucket/runs/x"
    assert fs._split_glob("gs://bucket/tokens/*.parquet") == ("gs://bucket/tokens", "*.parquet")
    with pytest.raises(ValueError, match="bucket"):
        fs._split_glob("gs://*/x.parquet")


def test_tokenize_outputs_are_read_under_the_output_policy(tmp_path):
    """An afm dataset directory is read only when its run finished, and only its token
    shards; staging folders of unfinished runs are never trained on."""
    out = tmp_path / "tokens"
    out.mkdir()
    shard = write_token_shard([{"id": "a", "source": "web", "tokens": [1, 2, 3]}],
                              out / "tokens-00000-of-00001.parquet")
    (out / "manifest.json").write_text("{}")
    with pytest.raises(DataError, match="_SUCCESS"):
        expand_paths([str(out)])
    (out / "_SUCCESS").write_text('{"files": {"tokens-00000-of-00001.parquet": 1}}')
    staging = out / ".staging-run2"
    staging.mkdir()
    write_token_shard([{"id": "b", "source": "web", "tokens": [4]}], staging / "tokens-00000-of-00001.parquet")
    assert expand_paths([str(out)]) == [str(shard)]
    # A plain folder holding that dataset is searched, but never inside a staging folder.
    assert expand_paths([str(tmp_path)]) == [str(shard)]

    docs = tmp_path / "corpus"
    docs.mkdir()
    write_token_shard([{"id": "c", "source": "web", "tokens": [5]}], docs / "documents-00000-of-00001.parquet")
    (docs / "_SUCCESS").write_text("{}")
    with pytest.raises(DataError, match="afm tokenize"):
        expand_paths([str(docs)])
    # An unfinished dataset met while searching a parent folder is refused too.
    (out / "_SUCCESS").unlink()
    with pytest.raises(DataError, match="_SUCCESS"):
        expand_paths([str(tmp_path / "tok*" / "*.parquet")])


def test_data_coverage_counts_tokens_from_footers_and_warns_on_tiny_or_repeated_data(tmp_path):
    """A corpus with fewer tokens than parameters, and a run that reads its data many
    times, are said before the first step, with what to change."""
    from afm.training.data.coverage import coverage, data_warnings, shard_tokens

    rows = [{"id": str(i), "source": "web", "tokens": list(range(1, 2 + i % 7))} for i in range(50)]
    index = ShardIndex([write_token_shard(rows, tmp_path / "t.parquet", row_group_size=8)])
    exact = sum(len(r["tokens"]) for r in rows)
    assert shard_tokens(index) == exact  # from the footers, no data read
    stream = coverage(index, steps=10, global_batch=4, seq_len=32, conversation_rows=False)
    assert stream.read_tokens == 10 * 4 * 32 and stream.passes == pytest.approx(1280 / exact)
    warnings = data_warnings(stream, params=1_000_000)
    assert any(w.startswith("tiny corpus") and f"{exact:,} tokens" in w for w in warnings)
    assert any(w.startswith("data repeats") and "--steps" in w for w in warnings)
    chats = coverage(index, steps=10, global_batch=4, seq_len=32, conversation_rows=True)
    assert chats.passes == pytest.approx(40 / 50)  # one conversation a row: under one pass
    assert data_warnings(chats, params=10) == []
