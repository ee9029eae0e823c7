"""Two small neural detectors of word-bigram chains (issue 54's one junk kind under its bar),
trained and judged on development data only (WCXB's pages and this machine's technical
documents; never ScrapingHub or Utomo & Leu). See README.md for what they showed.

* ``context-gain``: a causal transformer language model of the training sites' main texts,
  trained at three attention windows at once (the token itself, three tokens, 64 tokens).
  A text's signal is how much the long window lowers its loss against the one-token window
  (nats a token): real writing should gain from context, a chain (each word drawn given
  the one before) should not.
* ``discriminator``: the same encoder trained to tell 128-token windows of chains (made by
  ``afm quality junk``'s generator from the training sites' and documents' texts) from
  windows of the texts themselves; a text's score is the mean logit of its windows.

Each prints, at the thresholds that lose 1%, 2% and 5% of the held-out good text the other
default stages keep, the share of held-out chains caught, and the signal's quantiles per
kind of text.

    python experiments/chain-detectors/run.py context-gain --wcxb WCXB --steps 1500
    python experiments/chain-detectors/run.py discriminator --wcxb WCXB --steps 1500
    python experiments/chain-detectors/run.py shipped --wcxb WCXB [--model context_gain.npz]
    python experiments/chain-detectors/run.py news --bbc BBC [--model context_gain.npz]

``news`` is a second development set: BBC News articles of 2004-5 (Greene & Cunningham's
2,225 texts, five topics; not shipped, not trained on, never part of the held-out look), the
shipped rule at its threshold and at thresholds chosen on these articles themselves.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from afm.filters.extraction.gold import load_wcxb_all
from afm.filters.quality.audit import run_chain
from afm.filters.quality.defaults import development_split
from afm.filters.quality.junk import make_junk, materials_for
from afm.filters.quality.rules import QualityConfig
from afm.pipelines.curate.stages import document_filters

TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*|[^\w\s]")
SPECIALS = ("<pad>", "<num>", "<punct>", "<unk>", "<bos>")
PAD, NUM, PUNCT, UNK, BOS = range(len(SPECIALS))
WIDTH, LAYERS, HEADS = 96, 2, 4


def tokens(text: str) -> list[str]:
    return [t.lower() for t in TOKEN.findall(text)]


def unknown_id(token: str) -> int:
    return NUM if token.isdigit() else (PUNCT if not token[0].isalnum() else UNK)


def development_data(wcxb: Path) -> dict[str, list]:
    """Training texts (70% of WCXB's sites and of the technical documents), the held-out
    good texts and chains that the other default stages keep, with their kinds."""
    split = development_split(load_wcxb_all(wcxb))
    chains = make_junk(materials_for(split.held, split.boilerplate), ["machine_made"], per_kind=400, seed=11)
    others = document_filters({"quality": {"context_gain_model": None}})  # every default stage but the chain rule
    good_kept = [o.kept for o in run_chain(others, [t.text for t in split.good])]
    chains_kept = [o.kept for o in run_chain(others, [j.text for j in chains])]
    return {"train": [*split.train, *split.tech_train],
            "good": [(t.kind, t.text) for t, kept in zip(split.good, good_kept) if kept],
            "chains": [j.text for j, kept in zip(chains, chains_kept) if kept]}


def vocabulary(texts: list[str], size: int) -> dict[str, int]:
    counts = collections.Counter(t for text in texts for t in tokens(text))
    words = [w for w, _ in counts.most_common(size - len(SPECIALS)) if w not in SPECIALS]
    return {w: i for i, w in enumerate([*SPECIALS, *words])}


SUFFIXES = ("ly", "ing", "ed", "tion", "sion", "ment", "ness", "al", "ous", "ive", "able", "ible", "er", "est", "ity",
            "ize", "ise", "ful", "less", "ic", "s")
SHAPES = [f"<{case}{suffix}>" for case in "lCU" for suffix in (*SUFFIXES, "")]


def shape_of(token: str) -> str:
    """A word outside a skeleton vocabulary as its case (lower, Capitalised, UPPER) and suffix."""
    case = "U" if token.isupper() and len(token) > 1 else ("C" if token[0].isupper() else "l")
    low = token.lower()
    return next((f"<{case}{s}>" for s in SUFFIXES if low.endswith(s) and len(low) > len(s) + 2), f"<{case}>")


def skeleton_vocabulary(texts: list[str], keep: int) -> dict[str, int]:
    """The ``keep`` commonest words and a token per word shape (:func:`shape_of`) for the rest:
    a vocabulary with no site's names in it."""
    counts = collections.Counter(t for text in texts for t in tokens(text))
    return {w: i for i, w in enumerate([*SPECIALS, *SHAPES, *[w for w, _ in counts.most_common(keep)]])}


def encode(text: str, vocab: dict[str, int]) -> np.ndarray:
    if "<l>" in vocab:  # a skeleton vocabulary: unknown words by shape, read before lower-casing
        raw = TOKEN.findall(text)
        return np.array([vocab.get(t.lower(), NUM if t.isdigit() else PUNCT if not t[0].isalnum()
                                   else vocab[shape_of(t)]) for t in raw], np.int32)
    return np.array([vocab.get(t, unknown_id(t)) for t in tokens(text)], np.int32)


def init(key: jax.Array, vocab_size: int, length: int, head: bool) -> dict:
    keys = iter(jax.random.split(key, 4 + 4 * LAYERS))

    def normal(shape: tuple[int, ...]) -> jax.Array:
        return jax.random.normal(next(keys), shape) * 0.02

    params = {"emb": normal((vocab_size, WIDTH)), "pos": normal((length, WIDTH)), "layers": [
        {"qkv": normal((WIDTH, 3 * WIDTH)), "o": normal((WIDTH, WIDTH)), "w1": normal((WIDTH, 4 * WIDTH)),
         "w2": normal((4 * WIDTH, WIDTH))} for _ in range(LAYERS)]}
    if head:
        params["out"] = normal((WIDTH,))
    return params


def rms(x: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)


def encoder(params: dict, x: jax.Array, mask: jax.Array) -> jax.Array:
    """Pre-norm transformer layers; ``mask`` (query, key) says what each position sees."""
    h = params["emb"][x] + params["pos"][: x.shape[1]]
    for layer in params["layers"]:
        q, k, v = jnp.split(rms(h) @ layer["qkv"], 3, -1)

        def heads(a: jax.Array) -> jax.Array:
            return a.reshape(*a.shape[:2], HEADS, WIDTH // HEADS)

        scores = jnp.einsum("bthd,bshd->bhts", heads(q), heads(k)) / np.sqrt(WIDTH // HEADS)
        attn = jax.nn.softmax(jnp.where(mask, scores, -1e9), -1)
        h = h + jnp.einsum("bhts,bshd->bthd", attn, heads(v)).reshape(h.shape) @ layer["o"]
        h = h + jax.nn.gelu(rms(h) @ layer["w1"]) @ layer["w2"]
    return rms(h)


def token_losses(params: dict, x: jax.Array, window: int) -> jax.Array:
    """Each next token's loss seeing at most ``window`` tokens (itself included)."""
    inputs, targets = x[:, :-1], x[:, 1:]
    i = jnp.arange(inputs.shape[1])
    causal = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)
    logits = encoder(params, inputs, causal) @ params["emb"].T
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), targets[..., None], -1)[..., 0]


def window_logits(params: dict, x: jax.Array) -> jax.Array:
    seen = x != PAD
    h = encoder(params, x, seen[:, None, None, :])
    pooled = (h * seen[..., None]).sum(1) / jnp.maximum(seen.sum(1, keepdims=True), 1)
    return pooled @ params["out"] * 4


def train(loss: Callable, params: dict, batches: Callable[[np.random.Generator], tuple], steps: int) -> dict:
    schedule = optax.warmup_cosine_decay_schedule(0, 2e-3, min(100, steps // 4), steps)
    opt = optax.adamw(schedule, weight_decay=0.05)

    @jax.jit
    def step(params: dict, state: optax.OptState, batch: tuple) -> tuple:
        value, grads = jax.value_and_grad(loss)(params, *batch)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, value

    state, rng, start = opt.init(params), np.random.default_rng(0), time.time()
    for i in range(steps):
        params, state, value = step(params, state, batches(rng))
        if i % 100 == 0 or i == steps - 1:
            print(f"step {i}: loss {float(value):.3f} ({time.time() - start:.0f} s)", flush=True)
    return params


def report(name: str, good: list[tuple[str, float]], chains: list[float], high_is_chain: bool) -> None:
    sign = 1.0 if high_is_chain else -1.0
    g = sign * np.array([v for _, v in good])
    c = sign * np.array(chains)
    for loss in (0.01, 0.02, 0.05):
        threshold = np.quantile(g, 1 - loss)
        print(f"{name}: losing {loss:.0%} of held-out good text catches {np.mean(c > threshold):.1%} of chains")
    by_kind = collections.defaultdict(list)
    for kind, value in good:
        by_kind[kind].append(value)
    by_kind["chains"] = list(chains)
    for kind, values in sorted(by_kind.items()):
        q = np.quantile(values, [0.02, 0.1, 0.5, 0.9, 0.98])
        print(f"  {kind:14s} {len(values):4d}  q02/q10/median/q90/q98 " + " ".join(f"{v:+.3f}" for v in q))


def context_gain(data: dict, steps: int, save: Path | None = None, skeleton: int = 0) -> None:
    length, windows = 64, (64, 3, 1)
    texts = [t.text for t in data["train"]]
    vocab = skeleton_vocabulary(texts, skeleton) if skeleton else vocabulary(texts, 4096)
    stream = np.concatenate([np.r_[BOS, encode(t.text, vocab)] for t in data["train"]]).astype(np.int32)
    print(f"{len(stream):,} training tokens, unknown {np.mean(stream == UNK):.1%}")

    def loss(params: dict, x: jax.Array) -> jax.Array:
        return sum(token_losses(params, x, w).mean() for w in windows) / len(windows)

    def batch(rng: np.random.Generator) -> tuple:
        starts = rng.integers(0, len(stream) - length - 1, 48)
        return (jnp.asarray(np.stack([stream[s:s + length + 1] for s in starts])),)

    params = train(loss, init(jax.random.PRNGKey(0), len(vocab), length, head=False), batch, steps)
    if save is not None:  # the weights and the vocabulary, for the next step (a cheaper scoring pass, a rule)
        flat = {"/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path): np.asarray(v)
                for path, v in jax.tree_util.tree_flatten_with_path(params)[0]}
        np.savez_compressed(save, vocabulary=np.array(list(vocab)), **flat)
        print(f"saved {save}")
    losses = jax.jit(token_losses, static_argnums=2)

    def gain(text: str) -> float | None:
        ids = np.r_[BOS, encode(text, vocab)][: 1 + length * 8]
        n = (len(ids) - 1) // length
        if n == 0:
            return None
        x = jnp.asarray(np.stack([ids[i * length:i * length + length + 1] for i in range(n)]))
        full, one = (np.asarray(losses(params, x, w)) for w in (length, 1))
        use = (np.asarray(x[:, 1:]) != UNK) & (np.arange(length)[None, :] >= 4)
        return float((one - full)[use].mean())

    good = [(k, g) for k, t in data["good"] if (g := gain(t)) is not None]
    chains = [g for t in data["chains"] if (g := gain(t)) is not None]
    report("context gain (nats a token, long window over one token)", good, chains, high_is_chain=False)
    if data.get("news"):  # the second development set: the threshold of 2% of the first's good text
        threshold = np.quantile([g for _, g in good], 0.02)
        news = [(k, g) for k, t in data["news"]["good"] if (g := gain(t)) is not None]
        news_chains = [g for t in data["news"]["chains"] if (g := gain(t)) is not None]
        print(f"news at the threshold losing 2% of the development good text: articles failing "
              f"{np.mean([g < threshold for _, g in news]):.1%}, chains caught {np.mean(np.array(news_chains) < threshold):.1%}")
        report("news at its own thresholds", news, news_chains, high_is_chain=False)


def discriminator(data: dict, steps: int) -> None:
    length = 128
    real = [t.text for t in data["train"]]
    chains = []
    for seed in range(6):
        chains += [j.text for j in make_junk(materials_for(data["train"]), ["machine_made"],
                                             per_kind=len(data["train"]), seed=100 + seed)]
    vocab = vocabulary(real, 16384)
    real_ids = [a for a in (encode(t, vocab) for t in real) if len(a) >= 40]
    chain_ids = [a for a in (encode(t, vocab) for t in chains) if len(a) >= 40]
    print(f"{len(real_ids):,} real texts, {len(chain_ids):,} chains to train on")

    def window(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if len(a) <= length:
            return np.pad(a, (0, length - len(a)))
        start = rng.integers(0, len(a) - length)
        return a[start:start + length]

    def batch(rng: np.random.Generator) -> tuple:
        xs = [window(real_ids[i], rng) for i in rng.integers(0, len(real_ids), 32)]
        xs += [window(chain_ids[i], rng) for i in rng.integers(0, len(chain_ids), 32)]
        return jnp.asarray(np.stack(xs)), jnp.asarray(np.r_[np.zeros(32), np.ones(32)].astype(np.float32))

    def loss(params: dict, x: jax.Array, y: jax.Array) -> jax.Array:
        return optax.sigmoid_binary_cross_entropy(window_logits(params, x), y).mean()

    params = train(loss, init(jax.random.PRNGKey(0), len(vocab), length, head=True), batch, steps)
    logits = jax.jit(window_logits)

    def score(text: str) -> float | None:
        a = encode(text, vocab)
        if len(a) < 40:
            return None
        windows = [a[i:i + length] for i in range(0, max(len(a) - length, 0) + 1, length)][:4]
        x = jnp.asarray(np.stack([np.pad(w, (0, length - len(w))) for w in windows]))
        return float(np.mean(np.asarray(logits(params, x))))

    good = [(k, s) for k, t in data["good"] if (s := score(t)) is not None]
    held_chains = [s for t in data["chains"] if (s := score(t)) is not None]
    report("discriminator (mean window logit)", good, held_chains, high_is_chain=True)


def shipped_rule(data: dict, model_path: Path) -> None:
    """The rule's own model (``afm quality train-context-gain``: the one trainer, the AFM
    transformer, read by the numpy pass of ``afm.filters.quality.context_gain``) on the same
    held-out texts, scoring the first 1, 2, 4, 8 and 12 windows of 64 words."""
    from afm.filters.quality import context_gain as cg

    model = cg.ContextGainModel(model_path)
    for windows in (1, 2, 4, 8, 12):
        cg.MAX_WINDOWS = windows
        good = [(k, r[0]) for k, t in data["good"] if (r := model.gain(t))[1]]
        chains = [r[0] for t in data["chains"] if (r := model.gain(t))[1]]
        report(f"shipped model, {windows} window(s) of 64 words", good, chains, high_is_chain=False)


def bbc_articles(root: Path) -> list:
    """The BBC set's articles of at least 200 words (a file: headline, blank line, body), as
    ``KindText`` with the folder (business, entertainment, politics, sport, tech) as topic."""
    from afm.filters.quality.texts import KindText

    out = []
    for path in sorted(root.glob("*/*.txt")):
        body = path.read_bytes().decode("latin-1").partition("\n")[2].strip()
        if len(body.split()) >= 200:
            topic = path.parent.name
            out.append(KindText(body, "bbc", "article", topic, f"{topic}/{path.name}", topic=topic))
    return out


def news_data(bbc: Path) -> dict[str, list]:
    """The BBC articles and chains made from them (400, by topic) that the other default stages keep."""
    texts = bbc_articles(bbc)
    chains = make_junk(materials_for(texts), ["machine_made"], per_kind=400, seed=11)
    others = document_filters({"quality": {"context_gain_model": None}})
    good = [(t.topic, t.text) for t, o in zip(texts, run_chain(others, [t.text for t in texts])) if o.kept]
    kept_chains = [j.text for j, o in zip(chains, run_chain(others, [j.text for j in chains])) if o.kept]
    return {"texts": texts, "good": good, "chains": kept_chains}


def news_check(bbc: Path, model_path: Path) -> None:
    """The rule on articles of a site, a decade and a vocabulary the model never read."""
    from afm.filters.quality import context_gain as cg
    from afm.filters.quality.context_gain_train import gains

    news = news_data(bbc)
    texts, good, kept_chains = news["texts"], news["good"], news["chains"]
    model = cg.load_context_gain_model(str(model_path))  # the rule's cached load: one read
    sidecar = Path(f"{model_path}.json")  # the threshold its training chose
    threshold = json.loads(sidecar.read_text())["threshold"] if sidecar.exists() else QualityConfig().min_context_gain
    # as the rule scores (its prose lines, its languages); NaN: a text it does not judge
    good_gain = gains(model_path, [text for _, text in good])
    judged = [(topic, text, v) for (topic, text), v in zip(good, good_gain) if np.isfinite(v)]
    g = [(topic, v) for topic, _, v in judged]
    c = np.array([v for v in gains(model_path, kept_chains) if np.isfinite(v)])
    values = np.array([v for _, v in g])
    print(f"{len(texts):,} articles of 200+ words, {len(good):,} kept by the other stages ({len(g):,} judged by "
          f"the rule); {len(c)} chains they keep and the rule judges")
    print(f"at the shipped threshold {threshold}: articles failing {np.mean(values < threshold):.1%}, "
          f"chains caught {np.mean(c < threshold):.1%}")
    for topic in sorted({k for k, _ in g}):
        v = np.array([x for k, x in g if k == topic])
        print(f"  {topic:14s} {len(v):4d} failing {np.mean(v < threshold):.1%}")
    unknown = np.array([np.mean(cg.encode(text, model.index)[: cg.MAX_WINDOWS * cg.WINDOW + 1] == cg.UNK)
                        for _, text, _ in judged])
    for lo, hi in ((0, 0.15), (0.15, 0.2), (0.2, 0.3), (0.3, 1)):
        band = (unknown >= lo) & (unknown < hi)
        if band.any():
            print(f"  unknown words {lo:.0%}-{hi:.0%}: {band.sum():4d} articles, failing {np.mean(values[band] < threshold):.1%}")
    report("the rule at thresholds chosen on these articles", g, list(c), high_is_chain=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("detector", choices=("context-gain", "discriminator", "shipped", "news"))
    parser.add_argument("--wcxb", type=Path, help="WCXB checkout (dev/ and test/)")
    parser.add_argument("--bbc", type=Path, help="news, context-gain: the BBC set's folder (business/, entertainment/, "
                        "...); context-gain also scores its model on it")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--save", type=Path, help="context-gain: write the trained model here (.npz)")
    parser.add_argument("--skeleton", type=int, default=0,
                        help="context-gain: keep this many commonest words, the rest as word shapes (0: 4,096 words)")
    parser.add_argument("--model", type=Path, help="shipped, news: the rule's model (.npz; default: the shipped one)")
    args = parser.parse_args()
    if args.detector == "news":
        from afm.filters.quality.context_gain import DEFAULT_MODEL

        if args.bbc is None:
            parser.error("news needs --bbc")
        news_check(args.bbc, args.model or DEFAULT_MODEL)
        return
    if args.wcxb is None:
        parser.error(f"{args.detector} needs --wcxb")
    data = development_data(args.wcxb)
    print(f"{len(data['train']):,} training texts; held out: {len(data['good']):,} good texts and "
          f"{len(data['chains']):,} chains the other stages keep")
    if args.detector == "context-gain":
        if args.bbc is not None:
            data["news"] = news_data(args.bbc)
        context_gain(data, args.steps, args.save, args.skeleton)
    elif args.detector == "shipped":
        from afm.filters.quality.context_gain import DEFAULT_MODEL

        shipped_rule(data, args.model or DEFAULT_MODEL)
    else:
        discriminator(data, args.steps)


if __name__ == "__main__":
    main()
