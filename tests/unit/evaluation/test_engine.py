"""The native engine agrees with the model's own unpacked forward pass and sampler."""

from __future__ import annotations

import numpy as np
import pytest

from afm.evaluation.engine import InferenceEngine
from afm.evaluation.packing import ScoreRequest
from afm.evaluation.tiny import tiny_model
from afm.model.inference.sampling import generate
from afm.model.inference.scoring import score_tokens


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=1, max_seq_len=256)


def test_packed_scores_equal_one_request_at_a_time(model) -> None:
    rng = np.random.default_rng(0)
    lengths = [5, 37, 90, 250]  # few distinct lengths: the reference compiles once per length
    seqs = [rng.integers(4, 512, lengths[i % 4]).tolist() for i in range(24)]
    cont = [int(rng.integers(1, len(s))) for s in seqs]
    reqs = [ScoreRequest(tuple(s[:-1]), tuple(s[1:]), k) for s, k in zip(seqs, cont)]
    engine = InferenceEngine(model, tokens_per_batch=1024)
    got = engine.score(reqs)
    for s, k, (lp, _greedy) in zip(seqs, cont, got):
        ref = np.asarray(score_tokens(model, s))[-k:]
        assert lp == pytest.approx(float(ref.sum()), abs=2e-4)
    # one program per length bucket, however many requests of however many lengths
    assert len(engine.stats.shapes) <= len(engine.buckets)
    assert 0 < engine.stats.packing_efficiency <= 1


def test_greedy_flag_marks_the_argmax_continuation(model) -> None:
    engine = InferenceEngine(model, tokens_per_batch=512)
    prompt = [1, 20, 30, 40]
    best = generate(model, [prompt], max_new_tokens=3)[0]
    other = [(best[0] + 1) % 512] + best[1:]
    (lp_best, g_best), (lp_other, g_other) = engine.score(
        [ScoreRequest(tuple(prompt + best[:-1]), tuple(prompt[1:] + best), 3),
         ScoreRequest(tuple(prompt + other[:-1]), tuple(prompt[1:] + other), 3)])
    assert g_best and not g_other


def test_generation_matches_the_model_sampler_and_stops(model) -> None:
    rng = np.random.default_rng(1)
    prompts = [rng.integers(4, 512, int(rng.integers(1, 60))).tolist() for _ in range(7)]
    engine = InferenceEngine(model, gen_batch=4, chunk=8)
    ours = engine.generate(prompts, max_new_tokens=20)
    assert ours == generate(model, prompts, max_new_tokens=20)
    # a stop token ends a row (and is dropped); a stop check ends it between chunks
    stop = ours[0][5]
    cut = engine.generate(prompts[:1], max_new_tokens=20, stop_token_ids=[stop])[0]
    assert cut == ours[0][:ours[0].index(stop)]
    early = engine.generate(prompts[:2], max_new_tokens=64, is_finished=lambda i, toks: len(toks) >= 3)
    assert all(3 <= len(t) <= 8 for t in early)  # stopped at the first chunk boundary


def test_too_long_requests_are_refused(model) -> None:
    engine = InferenceEngine(model)
    with pytest.raises(ValueError, match="exceed"):
        engine.score([ScoreRequest(tuple(range(300)), tuple(range(300)), 1)])


def test_shared_context_scoring_equals_packed_scoring(model) -> None:
    rng = np.random.default_rng(2)
    prefixes, items, reqs = [], [], []
    for g in range(12):
        ctx = rng.integers(4, 512, int(rng.integers(2, 120))).tolist()
        prefixes.append(tuple(ctx[:-1]))
        for _ in range(int(rng.integers(2, 5))):
            cont = rng.integers(4, 512, int(rng.integers(1, 20))).tolist()
            items.append((g, (ctx[-1], *cont[:-1]), tuple(cont)))
            whole = ctx + cont
            reqs.append(ScoreRequest(tuple(whole[:-1]), tuple(whole[1:]), len(cont)))
    engine = InferenceEngine(model, tokens_per_batch=2048)
    packed, shared = engine.score(reqs), engine.score_shared(prefixes, items)
    for (a, ga), (b, gb) in zip(packed, shared):
        assert a == pytest.approx(b, abs=1e-4) and ga == gb


def test_a_tensor_parallel_mesh_gives_the_same_scores(model) -> None:
    from afm.evaluation.harness import _parse_mesh

    reqs = [ScoreRequest(tuple(range(4, 4 + n)), tuple(range(5, 5 + n)), 3) for n in (10, 50, 100)]
    base = InferenceEngine(model).score(reqs)
    sharded = InferenceEngine(model, mesh=_parse_mesh("2x1x4x1")).score(reqs)
    assert [round(a, 4) for a, _ in base] == [round(b, 4) for b, _ in sharded]
    with pytest.raises(ValueError, match="DATAxFSDP"):
        _parse_mesh("data=2")


def test_a_context_with_more_continuations_than_a_row_holds_is_split(model) -> None:
    """Tree packing: a context whose continuations overflow the largest row repeats in
    two trees; an empty context works; the results match one request at a time."""
    rng = np.random.default_rng(5)
    ctx = rng.integers(4, 512, 101).tolist()
    prefixes = [tuple(ctx[:-1]), ()]
    items, reqs = [], []
    for g, n_cont in ((0, 8), (1, 3)):
        last = ctx[-1] if g == 0 else 7
        for _ in range(n_cont):
            cont = rng.integers(4, 512, 40).tolist()
            items.append((g, (last, *cont[:-1]), tuple(cont)))
            whole = (ctx if g == 0 else [last]) + cont
            reqs.append(ScoreRequest(tuple(whole[:-1]), tuple(whole[1:]), len(cont)))
    engine = InferenceEngine(model, tokens_per_batch=1024)
    assert 100 + 8 * 40 > engine.max_length  # the first context does not fit one row with all 8
    shared, alone = engine.score_shared(prefixes, items), [engine.score([r])[0] for r in reqs]
    for (a, ga), (b, gb) in zip(alone, shared):
        assert a == pytest.approx(b, abs=1e-4) and ga == gb
    assert {kind for kind, _ in engine.stats.shapes} == {"score", "score_trees"}


def test_scored_slots_gather_each_span_and_say_where_it_lands() -> None:
    """The readout runs only on the scored slots: ``at`` lists them row by row (K from a
    few fractions of the row), and each span's scores are found again by (row, k, n)."""
    from afm.evaluation.engine import scored_slots

    at, where = scored_slots([(0, 10, 3), (0, 50, 2), (1, 0, 1)], rows=2, length=512)
    assert at.shape == (2, 64)  # 5 slots in the fullest row -> 512 / 8
    assert at[0, :5].tolist() == [10, 11, 12, 50, 51] and at[1, 0] == 0
    assert where == [(0, 0, 3), (0, 3, 2), (1, 0, 1)]
    at, _ = scored_slots([(0, 0, 200)], rows=1, length=256)
    assert at.shape == (1, 256)


def test_a_large_model_decodes_on_split_weights_with_the_same_tokens(model, monkeypatch) -> None:
    """Above the size threshold CPU generation runs on a tensor-parallel copy of the
    weights (memory-bound decode); scoring keeps rows split over every device."""
    import afm.evaluation.engine as engine_module
    from afm.evaluation.engine import decoding_mesh_config
    from afm.model.config import get_config
    from afm.model.distributed.sharding import MeshConfig

    assert decoding_mesh_config(model.cfg, 8, "cpu") == MeshConfig(data=-1)  # tiny: rows
    big = get_config("100m")
    assert decoding_mesh_config(big, 8, "cpu") == MeshConfig(data=-1, tensor=4)  # 4 key/value heads
    assert decoding_mesh_config(big, 1, "gpu") == MeshConfig(data=-1)
    monkeypatch.setattr(engine_module, "TENSOR_PARALLEL_DECODE_BYTES", 0)
    engine = InferenceEngine(model, gen_batch=4, chunk=8)
    assert engine.decoding.mesh.shape["tensor"] == 2 and engine.scoring.mesh.shape["tensor"] == 1
    prompts = [[5, 6, 7], list(range(10, 50)), [9] * 17]
    assert engine.generate(prompts, max_new_tokens=12) == generate(model, prompts, max_new_tokens=12)
