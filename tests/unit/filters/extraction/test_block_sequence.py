"""The block model's sequence net: its numpy forward pass (what extraction runs) against a
position-by-position reference and stored values, several nets' stacked pass against their
mean, its training (JAX) on a task only the neighbours decide, and its place in the model
file."""

from __future__ import annotations

import json
import math

import numpy as np

from afm.filters.extraction.block_model import MODEL_PATH, BlockModel, load_block_model
from afm.filters.extraction.block_sequence import (
    SequenceNet,
    SequenceNets,
    fit_sequence,
    net_setting,
)
from tests.threads import in_threads


def _random_net(rng: np.random.Generator, features: int = 5, width: int = 4) -> SequenceNet:
    layers = 5
    f32 = np.float32
    return SequenceNet(rng.normal(size=features).astype(f32), (rng.random(features) + 0.5).astype(f32),
                       rng.normal(size=(features, width)).astype(f32), rng.normal(size=width).astype(f32),
                       (0.3 * rng.normal(size=(layers, 3, width, width))).astype(f32),
                       (0.1 * rng.normal(size=(layers, width))).astype(f32),
                       (rng.random((layers, width)) + 0.5).astype(f32),
                       rng.normal(size=width).astype(f32), 0.1)


def _reference(net: SequenceNet, x: np.ndarray) -> np.ndarray:
    """The same network written one position and one tap at a time, in float64."""
    def gelu(v: float) -> float:
        return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))

    z = np.clip((x - net.mean) / net.scale, -5, 5).astype(np.float64)
    h = [[gelu(v) for v in row] for row in (z @ net.w_in + net.b_in)]
    n_rows, width = len(h), len(h[0])
    for j, d in enumerate(net.dilations):
        normed = []
        for row in h:
            rms = math.sqrt(sum(v * v for v in row) / width + 1e-5)
            normed.append([v / rms * net.gain[j][k] for k, v in enumerate(row)])
        new = []
        for t in range(n_rows):
            out = list(net.conv_b[j].astype(np.float64))
            for tap, src in enumerate((t - d, t, t + d)):
                if 0 <= src < n_rows:
                    for a in range(width):
                        for b in range(width):
                            out[b] += normed[src][a] * float(net.conv[j, tap, a, b])
            new.append([h[t][b] + gelu(out[b]) for b in range(width)])
        h = new
    logits = [sum(v * float(w) for v, w in zip(row, net.w_out)) + net.b_out for row in h]
    return np.array([1 / (1 + math.exp(-v)) for v in logits])


def test_numpy_forward_matches_a_position_by_position_reference_and_stored_values() -> None:
    rng = np.random.default_rng(7)
    net = _random_net(rng)
    x = rng.normal(size=(7, 5)).astype(np.float32)
    # stored values (float32 numpy), so any change of the forward pass is seen
    stored = [0.563274, 0.021115, 0.61583, 2.2e-05, 0.195154, 0.000209, 5.8e-05]
    assert np.abs(net.probability(x) - stored).max() < 2e-6
    longer = rng.normal(size=(40, 5)).astype(np.float32)  # wider than every dilation
    assert np.abs(net.probability(longer) - _reference(net, longer)).max() < 1e-5
    assert np.abs(net.probability(x[:3]) - _reference(net, x[:3])).max() < 1e-5
    assert net.probability(x[:0]).shape == (0,)
    again = SequenceNet.from_json(json.loads(json.dumps(net.to_json())))
    assert np.abs(again.probability(longer) - net.probability(longer)).max() < 1e-5


def test_several_nets_run_stacked_and_give_their_mean() -> None:
    rng = np.random.default_rng(3)
    nets = [_random_net(rng) for _ in range(3)]
    together = SequenceNets(nets)
    for rows in (1, 3, 20, 40):  # below and above the dilations
        x = rng.normal(size=(rows, 5)).astype(np.float32)
        alone = np.mean([net.probability(x) for net in nets], axis=0)
        assert np.abs(together.probability(x) - alone).max() < 1e-6
        assert np.abs(together.probability(x) - np.mean([_reference(n, x) for n in nets], axis=0)).max() < 1e-5
    assert together.probability(np.zeros((0, 5), np.float32)).shape == (0,)
    again = SequenceNets.from_json(json.loads(json.dumps(together.to_json())))
    assert len(again) == 3
    assert np.abs(again.probability(x) - together.probability(x)).max() < 1e-6
    # a model file made before nets were averaged holds one net, not a list
    assert len(SequenceNets.from_json(nets[0].to_json())) == 1
    import pytest

    from afm.errors import UserError

    with pytest.raises(UserError, match="different shapes"):
        SequenceNets([nets[0], _random_net(rng, width=6)])


def test_reused_arrays_carry_nothing_from_page_to_page_or_thread_to_thread(monkeypatch) -> None:
    """The forward pass reuses its thread's arrays (a fresh mapping a page cost a local run
    880 page faults): every page's result is what a model with fresh arrays gives, whatever
    came before it, above the reuse cap too, and threads sharing one model do not meet."""
    from afm.filters.extraction import block_sequence

    monkeypatch.setattr(block_sequence, "SCRATCH_MAX_ROWS", 300)
    rng = np.random.default_rng(11)
    nets = [_random_net(rng) for _ in range(3)]
    pages = [rng.normal(size=(rows, 5)).astype(np.float32) for rows in (40, 3, 260, 1, 17, 301, 600, 40, 2)]
    fresh = [SequenceNets(nets).probability(x) for x in pages]  # a new model each page
    shared = SequenceNets(nets)
    assert all(np.array_equal(shared.probability(x), want) for x, want in zip(pages, fresh))
    first = shared._arrays(40, 5)["taps"]
    assert np.shares_memory(first, shared._arrays(17, 5)["taps"])  # reused, not mapped again
    assert not np.shares_memory(first, shared._arrays(600, 5)["taps"])  # above the cap: its own
    results = in_threads(lambda k: [shared.probability(x) for x in (pages[k:] + pages[:k]) * 20], 3)
    for k, got in enumerate(results):
        want = (fresh[k:] + fresh[:k]) * 20
        assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_each_averaged_net_has_its_own_seed_and_one_net_settings(tmp_path) -> None:
    first, third = net_setting(0, {"seed": 5, "nets": 3}), net_setting(2, {"seed": 5, "nets": 3})
    assert first["seed"] == 5 and third["seed"] == 7
    assert "nets" not in first and {k: v for k, v in first.items() if k != "seed"} == {
        k: v for k, v in third.items() if k != "seed"}
    import pytest

    from afm.errors import UserError
    from afm.filters.extraction.block_train import Fits

    with pytest.raises(UserError, match="at least one sequence net"):
        Fits([], nets=0)
    # a net is filed under its own setting's key, whatever the count: the nets of a run
    # with fewer serve one with more
    (tmp_path / "blocks-x.pkl.gz").write_bytes(b"x")
    one, three = Fits([], cache=tmp_path, nets=1), Fits([], cache=tmp_path, nets=3)
    assert one.net_keys[0] == three.net_keys[0] and len(set(three.net_keys)) == 3


def _neighbour_pages(n_pages: int, seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Blocks whose label is the sign of the *previous* block's first feature: a model of
    one row at a time cannot do better than chance."""
    rng = np.random.default_rng(seed)
    pages = []
    for _ in range(n_pages):
        n = int(rng.integers(20, 60))
        x = rng.normal(size=(n, 3)).astype(np.float32)
        y = np.zeros(n, dtype=np.float32)
        y[1:] = x[:-1, 0] > 0
        w = np.full(n, 1.0 / n, dtype=np.float32)
        w[0] = 0.0
        pages.append((x, y, w))
    return pages


def test_training_learns_what_only_the_neighbours_decide() -> None:
    net = fit_sequence(_neighbour_pages(60, 0), {"width": 16, "epochs": 60, "learning_rate": 1e-2})
    held = _neighbour_pages(30, 1)
    right = total = 0
    for x, y, _ in held:
        p = net.probability(x)
        right += int(((p[1:] >= 0.5) == (y[1:] > 0.5)).sum())
        total += len(x) - 1
    assert right / total > 0.9


def test_model_file_carries_the_sequence_net(tmp_path) -> None:
    shipped = load_block_model(str(MODEL_PATH))
    width = 4
    rng = np.random.default_rng(0)
    n_features = len(shipped.names)
    net = SequenceNet(np.zeros(n_features, np.float32), np.ones(n_features, np.float32),
                      (0.1 * rng.normal(size=(n_features, width))).astype(np.float32),
                      np.zeros(width, np.float32), np.zeros((5, 3, width, width), np.float32),
                      np.zeros((5, width), np.float32), np.ones((5, width), np.float32),
                      np.zeros(width, np.float32), 0.0)
    model = BlockModel(shipped.forest, shipped.threshold, shipped.names, {}, None, shipped.rule,
                       SequenceNets([net, net]))
    path = tmp_path / "m.json"
    model.save(path)
    loaded = BlockModel.load(path)
    assert loaded.sequence is not None and len(loaded.sequence) == 2
    from afm.filters.extraction.block_features import features
    from afm.filters.extraction.blocks import page_blocks
    from tests.unit.filters.extraction.test_extract import ARTICLE

    table = page_blocks(ARTICLE)
    trees = shipped.forest.probability(features(table))
    # these nets say 0.5 for every block: the model's probability is the mean of the two
    assert np.allclose(loaded.probability(table), (trees + 0.5) / 2, atol=1e-6)


def _gold_pages(source: str, n: int, seed: int) -> list:
    """Pages of one source: a menu, an article of a few paragraphs (the gold), a footer."""
    from afm.filters.extraction.gold import GoldPage

    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(300)]
    pages = []
    for k in range(n):
        paras = [" ".join(rng.choice(vocab, size=int(rng.integers(25, 60)))).capitalize() + "."
                 for _ in range(int(rng.integers(3, 7)))]
        menu = "".join(f'<li><a href="/{i}">{rng.choice(vocab)}</a></li>' for i in range(6))
        html = (f'<html><body><nav class="menu"><ul>{menu}</ul></nav><article>'
                + "".join(f"<p>{p}</p>" for p in paras)
                + '</article><footer class="site-footer"><p>Copyright 2024 Example. '
                  'All rights reserved.</p></footer></body></html>')
        pages.append(GoldPage(source, f"{source}-{k}", None, html.encode(), "\n".join(paras)))
    return pages


def test_cross_validation_tries_the_sequence_net_and_names_the_model_it_chose(monkeypatch) -> None:
    import afm.filters.extraction.block_sequence as block_sequence
    from afm.filters.extraction.block_train import (
        VARIANT_NAMES,
        Choice,
        Fits,
        cross_validate,
        fit_model,
        page_record,
    )

    monkeypatch.setitem(block_sequence.SEQUENCE, "epochs", 3)
    monkeypatch.setitem(block_sequence.SEQUENCE, "nets", 2)
    records = []
    for s, source in enumerate(("scrapinghub", "utomo", "wcxb")):
        for page in _gold_pages(source, 6, s):
            r = page_record(page)
            r.texts["trafilatura"] = r.texts["cascade"] = r.texts["resiliparse"] = page.truth or ""
            records.append(r)
    fits = Fits(records)
    results = cross_validate(records, Choice(("one", "mix"), (0.5,)), fits=fits)
    assert {results[s]["model"] for s in ("scrapinghub", "utomo", "wcxb")} <= {
        VARIANT_NAMES["one"], VARIANT_NAMES["mix"]}
    # the inner choices fit one net per single source; a fold that takes the net fits its pair
    mixed = sum(results[s]["model"] == VARIANT_NAMES["mix"] for s in ("scrapinghub", "utomo", "wcxb"))
    assert len(fits.sequences) == 3 + mixed
    # each source set's nets: SEQUENCE["nets"] of them, trained with different seeds
    for nets in fits.sequences.values():
        assert len(nets) == 2 and not np.allclose(nets.nets[0].w_in, nets.nets[1].w_in)
    model = fit_model(records, range(len(records)), fits, choice=Choice(("one", "mix"), (0.5,)))
    assert any(key.startswith("mix/") for key in model.meta["inner_margins"])  # it was scored
    assert (model.sequence is not None) == (model.meta["variant"] == "mix")
    r = records[0]
    p = model.probability(r.table)
    assert p.shape == (len(r.table),) and np.all((p >= 0) & (p <= 1))
    # ``--net-only``: the trees alone are neither scored nor chosen
    only = fit_model(records, range(len(records)), fits, choice=Choice(("mix",), (0.5,)))
    assert only.meta["variant"] == "mix" and only.sequence is not None
    assert all(key.startswith("mix/") for key in only.meta["inner_margins"])
