"""A small convolution over a page's blocks in reading order: the block model's second voice.

The trees (``trees.Forest``) judge each block from its own row of features, in which the
neighbours appear only as a few hand-made columns (the blocks before and after, a window
of five). Boilernet and Web2Text read the page as a *sequence*: whether a block is main
text depends on the run of blocks it sits in (a comment thread, a list of teasers, the
article's paragraphs). :class:`SequenceNet` does that cheaply: the block features,
standardised, go through one dense layer and five residual convolutions of width three
with dilations 1, 2, 4, 8 and 16 (each block sees 63 blocks around it), each after an RMS
normalisation, then one logit per block. About 66,000 weights; extraction evaluates it in
numpy (six matrix products per page, ~0.6 ms on the gold sets' pages), so no JAX is loaded
at run time. :class:`SequenceNets` averages several of them, fitted with different seeds
(three by default: one net's seed moved a held-out source's F1 by 0.016), all in one
stacked pass (~1.9 ms a page for three).

``fit_sequence`` trains one with JAX and optax (weighted log loss, the block weights of
``block_train.training_pages``: a block weighs its tokens' share of its page, a page one
over its source's pages), pages batched by padded length. The block model averages the
nets' probability with the trees' (``BlockModel.probability``) when the by-source choice
takes it; held out by source the average scored above either alone
(experiments/extraction-selector/README.md).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from afm.errors import UserError
from afm.filters.scratch import ThreadArrays

DILATIONS = (1, 2, 4, 8, 16)
# Training settings (the held-out comparison's): width, passes over the pages, AdamW's
# peak rate (cosine decay to 0) and weight decay, the first net's seed, and how many nets
# (seeds seed, seed + 1, ...) the block model averages (``SequenceNets``).
SEQUENCE: dict[str, Any] = {"width": 64, "epochs": 15, "learning_rate": 2e-3,
                            "weight_decay": 1e-4, "seed": 0, "nets": 3}


def net_setting(k: int, setting: dict[str, Any] | None = None) -> dict[str, Any]:
    """The settings of the ``k``-th averaged net: one net's (no ``nets``), its seed the
    first seed plus ``k``."""
    s = {**SEQUENCE, **(setting or {})}
    one = {name: value for name, value in s.items() if name != "nets"}
    one["seed"] = int(s["seed"]) + k
    return one


# Pages are padded to one of these lengths in training (longer pages are left out of it;
# extraction reads any length).
_BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
_BLOCKS_PER_BATCH = 24576
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """GELU, tanh form (``jax.nn.gelu``'s default, so training and extraction agree),
    in one scratch array, ``out`` when given (few temporaries: on a small page numpy's
    per-call cost is much of what a forward pass spends)."""
    t = np.multiply(x, x, out=out)
    t *= 0.044715
    t += 1.0
    t *= x
    t *= _SQRT_2_OVER_PI
    np.tanh(t, out=t)
    t += 1.0
    t *= x
    t *= 0.5
    return t


# A forward pass reuses its thread's arrays page after page, up to pages of this many
# blocks (99% of the gold sets' pages have under 1,300; the arrays then hold about 6 kB a
# block for three nets). Fresh arrays each page cost more than their arithmetic where the
# allocator maps every block above 128 kB afresh, as a local curate run has it
# (pipelines/beam/allocator.py): the kernel faults each page of them in again, 843 faults
# a page on 1,385 real pages, and the nets took 4.9-5.0 ms a page against 2.5 reused
# (experiments/page-faults/).
SCRATCH_MAX_ROWS = 4096


_BLAS: Any = None


def _one_blas_thread() -> Any:
    """A context in which BLAS runs on the calling thread only. A page's products are small:
    OpenBLAS's helper threads add no speed there, and their spinning between calls doubled
    the extract stage's CPU time (13.6 against 7.2 ms a page on 600 real pages). threadpoolctl
    comes with scikit-learn on curation hosts; without it, BLAS is left as it is."""
    global _BLAS
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
        except ImportError:
            _BLAS = False
    if _BLAS is False:
        return contextlib.nullcontext()
    return _BLAS.limit(limits=1, user_api="blas")


def mixed(trees: np.ndarray, net: np.ndarray) -> np.ndarray:
    """The block model's probability when it carries a sequence net: the plain mean of the
    trees' and the net's (one rule for extraction and for the by-source choice that scores it)."""
    return (trees + net) / 2


@dataclass
class SequenceNet:
    """The weights, and the standardisation of the features they were trained on."""

    mean: np.ndarray  # (features,)
    scale: np.ndarray  # (features,)
    w_in: np.ndarray  # (features, width)
    b_in: np.ndarray  # (width,)
    conv: np.ndarray  # (layers, 3, width, width): taps at t - d, t, t + d
    conv_b: np.ndarray  # (layers, width)
    gain: np.ndarray  # (layers, width): the RMS normalisation's
    w_out: np.ndarray  # (width,)
    b_out: float
    dilations: tuple[int, ...] = DILATIONS

    def probability(self, x: np.ndarray) -> np.ndarray:
        """Per block (a row of one page's features, in page order): P(main content)."""
        alone = self.__dict__.get("_alone")
        if alone is None:
            alone = self.__dict__["_alone"] = SequenceNets((self,))
        return alone.probability(x)

    def to_json(self) -> dict[str, Any]:
        return {"dilations": list(self.dilations), "b_out": float(self.b_out),
                **{k: np.asarray(getattr(self, k), dtype=np.float32).round(7).tolist()
                   for k in ("mean", "scale", "w_in", "b_in", "conv", "conv_b", "gain", "w_out")}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SequenceNet:
        arrays = {k: np.asarray(data[k], dtype=np.float32)
                  for k in ("mean", "scale", "w_in", "b_in", "conv", "conv_b", "gain", "w_out")}
        return cls(**arrays, b_out=float(data["b_out"]), dilations=tuple(data["dilations"]))


class SequenceNets:
    """Several :class:`SequenceNet` of one shape (trained with different seeds) whose block
    probabilities are averaged. One net's seed moved a held-out source's F1 by 0.016, the mean
    of three by a fraction of that (experiments/extraction-selector/README.md). The nets run
    side by side: each weight stacked over the nets, every layer one batched product, so
    numpy's per-call overhead is paid once; the products themselves grow with the nets (three
    cost 1.9 ms a page on the gold sets' pages, one 0.66)."""

    def __init__(self, nets: Sequence[SequenceNet]) -> None:
        if not nets:
            raise UserError("a sequence model needs at least one net")
        shapes = {(n.w_in.shape, n.conv.shape, tuple(n.dilations)) for n in nets}
        if len(shapes) > 1:
            raise UserError(f"sequence nets of different shapes cannot be averaged: {sorted(shapes)}")
        self.nets = tuple(nets)
        self._scratch = ThreadArrays()
        self.dilations = tuple(nets[0].dilations)
        f32 = np.float32

        def stack(name: str) -> np.ndarray:
            return np.ascontiguousarray(np.stack([np.asarray(getattr(n, name), f32) for n in nets]))

        self.mean, self.scale = stack("mean")[:, None], stack("scale")[:, None]  # (k, 1, features)
        self.w_in, self.b_in = stack("w_in"), stack("b_in")[:, None]  # (k, f, w), (k, 1, w)
        k, layers, _, width, out = (len(nets), *nets[0].conv.shape)
        # (layers, k, 3 * width, width): taps [t - d | t | t + d] stacked, one product a layer
        self.conv = np.ascontiguousarray(stack("conv").reshape(k, layers, 3 * width, out)
                                         .transpose(1, 0, 2, 3))
        self.conv_b = np.ascontiguousarray(stack("conv_b").transpose(1, 0, 2)[:, :, None])
        self.gain = np.ascontiguousarray(stack("gain").transpose(1, 0, 2)[:, :, None])
        self.w_out = stack("w_out")[:, :, None]  # (k, w, 1)
        self.b_out = np.array([float(n.b_out) for n in nets], np.float64)[:, None]

    def __len__(self) -> int:
        return len(self.nets)

    def probability(self, x: np.ndarray) -> np.ndarray:
        """Per block (a row of one page's features, in page order): the nets' mean P(main content)."""
        if len(x) == 0:
            return np.zeros(0)
        with _one_blas_thread():
            return self._forward(x)

    def _arrays(self, rows: int, features: int) -> dict[str, np.ndarray]:
        """The forward pass's arrays for a page of ``rows`` blocks: views of this thread's
        reused ones (room for the next power of two of rows when a page needs more), fresh
        ones above :data:`SCRATCH_MAX_ROWS`."""
        k, _, width = self.w_in.shape
        shapes = {"x": (rows, features), "z": (k, rows, features), "h": (k, rows, width),
                  "t": (k, rows, width), "c": (k, rows, width), "taps": (k, rows, 3 * width),
                  "inv": (k, rows)}
        if rows > SCRATCH_MAX_ROWS:
            return {name: np.empty(shape, np.float32) for name, shape in shapes.items()}
        room = min(SCRATCH_MAX_ROWS, max(256, 1 << (rows - 1).bit_length()))
        return {name: self._scratch.view(name, shape, np.float32, math.prod(shape) // rows * room)
                for name, shape in shapes.items()}

    def _forward(self, x: np.ndarray) -> np.ndarray:
        a = self._arrays(len(x), x.shape[1])
        x32, z, h, t, c, taps = a["x"], a["z"], a["h"], a["t"], a["c"], a["taps"]
        np.copyto(x32, x, casting="same_kind")
        np.subtract(x32[None], self.mean, out=z)
        z /= self.scale
        np.clip(z, -5.0, 5.0, out=z)
        np.matmul(z, self.w_in, out=t)
        t += self.b_in
        h = _gelu(t, out=h)  # (k, rows, width)
        k, rows, width = h.shape
        left, mid, right = taps[..., :width], taps[..., width:2 * width], taps[..., 2 * width:]
        inv = a["inv"]
        for j, d in enumerate(self.dilations):
            np.einsum("kij,kij->ki", h, h, out=inv)
            inv *= 1.0 / width
            inv += 1e-5
            np.sqrt(inv, out=inv)
            normed = np.divide(h, inv[..., None], out=c)
            normed *= self.gain[j]
            # [t - d | t | t + d] copied from ``normed``, not from ``mid``: a copy between
            # two views of ``taps`` would make numpy take a temporary copy first.
            mid[...] = normed
            if d < rows:
                left[:, :d] = 0.0
                left[:, d:] = normed[:, :-d]
                right[:, :-d] = normed[:, d:]
                right[:, -d:] = 0.0
            else:
                left[:] = 0.0
                right[:] = 0.0
            np.matmul(taps, self.conv[j], out=c)
            c += self.conv_b[j]
            h += _gelu(c, out=t)
        logit = (h @ self.w_out)[..., 0].astype(np.float64) + self.b_out
        return (1.0 / (1.0 + np.exp(-logit))).mean(axis=0)

    def to_json(self) -> list[dict[str, Any]]:
        return [net.to_json() for net in self.nets]

    @classmethod
    def from_json(cls, data: list[dict[str, Any]] | dict[str, Any]) -> SequenceNets:
        """A list of nets, or one net (the model files made before nets were averaged)."""
        return cls([SequenceNet.from_json(d) for d in (data if isinstance(data, list) else [data])])


Page = tuple[np.ndarray, np.ndarray, np.ndarray]  # features, labels (0/1), weights


def _batches(lengths: Sequence[int], rng: np.random.Generator | None) -> list[tuple[int, list[int]]]:
    """Pages grouped by padded length, ~``_BLOCKS_PER_BATCH`` blocks a batch (shuffled
    when ``rng`` is given)."""
    groups: dict[int, list[int]] = {}
    for k, n in enumerate(lengths):
        if 0 < n <= _BUCKETS[-1]:
            groups.setdefault(next(b for b in _BUCKETS if b >= n), []).append(k)
    out = []
    for size, members in sorted(groups.items()):
        if rng is not None:
            rng.shuffle(members)
        step = max(1, _BLOCKS_PER_BATCH // size)
        out += [(size, members[at: at + step]) for at in range(0, len(members), step)]
    if rng is not None:
        rng.shuffle(out)  # type: ignore[arg-type]
    return out


def fit_sequence(pages: Sequence[Page], setting: dict[str, Any] | None = None,
                 log: Callable[[str], Any] | None = None) -> SequenceNet:
    """Train one :class:`SequenceNet` on ``pages`` (JAX on the CPU or an accelerator), with
    ``setting``'s seed (``net_setting`` gives each averaged net's)."""
    try:
        import jax
        import jax.numpy as jnp
        import optax
    except ImportError as exc:
        raise UserError("the block model's sequence net trains with JAX and optax (the "
                        "`train` extra: pip install 'afm[train]'); without them, leave out "
                        f"--sequence ({exc})") from exc

    s = {**SEQUENCE, **(setting or {})}
    width, dil = int(s["width"]), DILATIONS
    pages = [p for p in pages if len(p[0])]
    x_all = np.concatenate([p[0] for p in pages]).astype(np.float64)
    mean = x_all.mean(axis=0).astype(np.float32)
    scale = (x_all.std(axis=0) + 1e-6).astype(np.float32)
    total_w = float(sum(p[2].sum() for p in pages))
    n_features = x_all.shape[1]
    keys = jax.random.split(jax.random.PRNGKey(int(s["seed"])), 2 + len(dil))
    params = {
        "w_in": jax.random.normal(keys[0], (n_features, width)) / math.sqrt(n_features),
        "b_in": jnp.zeros(width),
        "conv": jnp.stack([jax.random.normal(k, (3, width, width)) * (0.5 / math.sqrt(3 * width))
                           for k in keys[2:]]),
        "conv_b": jnp.zeros((len(dil), width)), "gain": jnp.ones((len(dil), width)),
        "w_out": jax.random.normal(keys[1], (width,)) * 0.01, "b_out": jnp.zeros(()),
    }

    def shift(z: Any, d: int) -> Any:
        pad = ((0, 0), (d, 0), (0, 0)) if d > 0 else ((0, 0), (0, -d), (0, 0))
        return jnp.pad(z, pad)[:, :-d] if d > 0 else jnp.pad(z, pad)[:, -d:]

    def forward(p: dict[str, Any], x: Any, m: Any) -> Any:
        h = jax.nn.gelu(x @ p["w_in"] + p["b_in"]) * m[..., None]
        for j, d in enumerate(dil):
            n = h * jax.lax.rsqrt((h * h).mean(-1, keepdims=True) + 1e-5) * p["gain"][j]
            c = (shift(n, d) @ p["conv"][j, 0] + n @ p["conv"][j, 1]
                 + shift(n, -d) @ p["conv"][j, 2] + p["conv_b"][j])
            h = (h + jax.nn.gelu(c)) * m[..., None]
        return h @ p["w_out"] + p["b_out"]

    def loss(p: dict[str, Any], x: Any, y: Any, w: Any, m: Any) -> Any:
        return (optax.sigmoid_binary_cross_entropy(forward(p, x, m), y) * w).sum()

    lengths = [len(p[0]) for p in pages]
    rng = np.random.default_rng(int(s["seed"]))
    steps = len(_batches(lengths, None)) * int(s["epochs"])
    opt = optax.chain(optax.clip_by_global_norm(1.0),
                      optax.adamw(optax.cosine_decay_schedule(float(s["learning_rate"]), steps),
                                  weight_decay=float(s["weight_decay"])))
    state = opt.init(params)

    @jax.jit
    def step(p: dict[str, Any], st: Any, x: Any, y: Any, w: Any, m: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(p, x, y, w, m)
        updates, st = opt.update(grads, st, p)
        return optax.apply_updates(p, updates), st, value

    start = time.process_time()
    for epoch in range(int(s["epochs"])):
        total = 0.0
        for size, members in _batches(lengths, rng):
            x = np.zeros((len(members), size, n_features), np.float32)
            y = np.zeros((len(members), size), np.float32)
            w = np.zeros((len(members), size), np.float32)
            m = np.zeros((len(members), size), np.float32)
            for row, k in enumerate(members):
                px, py, pw = pages[k]
                n = len(px)
                x[row, :n] = np.clip((px - mean) / scale, -5.0, 5.0)
                y[row, :n], w[row, :n], m[row, :n] = py, pw * (1000.0 / total_w), 1.0
            params, state, value = step(params, state, x, y, w, m)
            total += float(value)
        if log:
            log(f"  sequence net: pass {epoch + 1}/{s['epochs']}, loss {total:.2f}, "
                f"{time.process_time() - start:.0f} CPU s")
    p = {k: np.asarray(v, dtype=np.float32) for k, v in params.items()}
    return SequenceNet(mean, scale, p["w_in"], p["b_in"], p["conv"], p["conv_b"], p["gain"],
                       p["w_out"], float(p["b_out"]), dil)
