"""Parity with Hugging Face transformers: an exported random-init model gives the same
log-probabilities in Qwen3ForCausalLM (float32, CPU), and the exported tokenizer encodes
like ours. Needs the ``hf`` extra (torch, transformers); skipped with a message otherwise.
"""

from __future__ import annotations

import json
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from afm.model.checkpoints.checkpoint import load_model, save_params
from afm.model.checkpoints.hf_export import export_hf, import_hf
from afm.model.config import get_config
from afm.model.text.tokenizer import Tokenizer, train_tokenizer
from afm.model.transformer import Transformer

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch", reason="HF parity needs torch (pip install 'afm[hf]')")
transformers = pytest.importorskip(
    "transformers", reason="HF parity needs transformers (pip install 'afm[hf]')"
)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hf")
    rng = random.Random(0)
    words = "the model data train apple web page text quality filter crawl report".split()
    docs = [{"id": str(i), "text": " ".join(rng.choice(words) for _ in range(30)) + f" {i * 7}."}
            for i in range(200)]
    (root / "docs.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    tok_dir = train_tokenizer([str(root / "docs.jsonl")], root / "tok", vocab_size=400)
    cfg = get_config("tiny", dtype="float32", n_layers=3)
    model = Transformer(cfg, rngs=nnx.Rngs(5))
    # Non-trivial norm scales, so a norm mapped to the wrong tensor shows up.
    keys = iter(jax.random.split(jax.random.key(1), 64))
    state = jax.tree.map(
        lambda x: x * (1 + 0.3 * jax.random.normal(next(keys), x.shape)) if x.ndim == 1 else x,
        nnx.state(model, nnx.Param),
    )
    nnx.update(model, state)
    save_params(model, root / "ckpt")
    out = export_hf(root / "ckpt", root / "hf", tokenizer_dir=tok_dir)
    return model, cfg, out, tok_dir, root


def test_logprobs_match_qwen3(exported) -> None:
    model, cfg, out, _, _ = exported
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    hf.eval()
    assert type(hf).__name__ == "Qwen3ForCausalLM"
    tokens = np.random.RandomState(0).randint(0, cfg.vocab_size, (2, 40))
    with torch.no_grad():
        theirs = hf(torch.tensor(tokens)).logits.float().numpy()
    ours = np.asarray(model(jnp.asarray(tokens)))
    assert np.abs(_log_softmax(theirs) - _log_softmax(ours)).max() < 1e-4


def test_tokenizer_matches_hf(exported) -> None:
    _, _, out, tok_dir, _ = exported
    ours = Tokenizer.load(tok_dir)
    theirs = transformers.AutoTokenizer.from_pretrained(str(out))
    texts = ["the model 2024 data", "  two  spaces\nnew line\t tab", "emoji 🤖 漢字 \x00 ctrl",
             "apple quality filter crawl report 31415"]
    for text in texts:
        ids = ours.encode(text)
        assert theirs.encode(text, add_special_tokens=False) == ids
        assert theirs.decode(ids) == text
    msgs = [{"role": "user", "content": "hi 12"}, {"role": "assistant", "content": "the data"}]
    hf_ids = theirs.apply_chat_template(msgs, tokenize=True)
    hf_ids = hf_ids["input_ids"] if isinstance(hf_ids, dict) or hasattr(hf_ids, "keys") else hf_ids
    assert list(hf_ids) == ours.encode_chat(msgs)[0]


def test_import_round_trips(exported) -> None:
    model, cfg, out, _, root = exported
    back, back_cfg = load_model(import_hf(out, root / "back"))
    assert back_cfg == cfg
    tokens = jnp.asarray([[1, 5, 9, 33, 2]])
    np.testing.assert_allclose(back(tokens), model(tokens), atol=1e-6)
