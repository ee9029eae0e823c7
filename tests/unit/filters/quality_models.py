"""Tiny quality models in the formats users bring, built in the test (nothing downloaded):
a fastText ``.bin`` with DCLM's labels and no afm sidecar, and Hugging Face
sequence-classification / regression directories with random weights."""

from __future__ import annotations

import json
from pathlib import Path

HQ = [
    "The heart pumps blood through two circuits. The pulmonary circuit carries blood to the lungs, "
    "where it takes up oxygen, and the systemic circuit carries it to every other organ.",
    "Photosynthesis turns light into chemical energy. Inside the chloroplast, water is split, oxygen "
    "is released and the energy is stored in sugars the plant uses to grow.",
    "A river carries sediment downstream and drops it where the current slows, which is why deltas "
    "form at river mouths and why the inside of a bend collects sand and gravel.",
    "Prime numbers have exactly two divisors. Every whole number greater than one can be written as "
    "a product of primes in only one way, a fact known as the fundamental theorem of arithmetic.",
    "The printing press made identical copies of a text possible, so that scholars in different "
    "cities could cite the same page and readers everywhere found the same words.",
    "Volcanoes form where magma reaches the surface. Along mid-ocean ridges the plates move apart "
    "and the rock that wells up builds new sea floor year after year.",
]
CC = [
    "Home | About | Contact | Login | Register | Cart (0) | Wishlist | Sale | New arrivals | Gift cards",
    "BUY NOW cheap watches best price click here free shipping limited offer buy now cheap deals",
    "Cookie settings Accept all Reject all Privacy policy Terms of use Manage preferences Close",
    "Share on Facebook Tweet Pin it Email Print Subscribe to our newsletter Follow us on Instagram",
    "Related posts: 10 best deals you will not believe | Top 5 gadgets | Click to see more offers",
    "Sign in to continue. Forgot password? Create account. Remember me. Terms apply. Help centre.",
]


def dclm_style_fasttext(path: Path, *, copies: int = 10) -> Path:
    """A fastText model trained the way DCLM's was written out: raw lines labelled
    ``__label__hq`` / ``__label__cc``, saved as ``.bin`` with no afm sidecar."""
    import fasttext

    from afm.filters.classifier import FASTTEXT_INIT_BLOCKS

    train = path.with_suffix(".train.txt")
    with train.open("w", encoding="utf-8") as fh:
        for _ in range(copies):
            for text in HQ:
                fh.write(f"__label__hq {text}\n")
            for text in CC:
                fh.write(f"__label__cc {text}\n")
    model = fasttext.train_supervised(input=str(train), epoch=5, lr=0.5, wordNgrams=2, dim=16,
                                      bucket=20_000, thread=FASTTEXT_INIT_BLOCKS, seed=0, verbose=0)
    model.save_model(str(path))
    train.unlink()
    return path


def corpus(path: Path) -> Path:
    """JSONL documents: the HQ texts (ids hq0..) and CC texts (ids cc0..)."""
    with path.open("w", encoding="utf-8") as fh:
        for prefix, texts in (("hq", HQ), ("cc", CC)):
            for i, text in enumerate(texts):
                fh.write(json.dumps({"id": f"{prefix}{i}", "source": "web", "text": text}) + "\n")
    return path


def tiny_hf_classifier(path: Path, *, num_labels: int = 1, labels: tuple[str, ...] = (), seed: int = 0) -> Path:
    """A BERT sequence-classification directory with random weights and a word-piece
    tokenizer over the test texts' words: ``num_labels=1`` is a regression head (as
    FineWeb-Edu's classifier), more is a classification head named by ``labels``."""
    import re

    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    words = sorted({w for t in HQ + CC for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    path.mkdir(parents=True, exist_ok=True)
    vocab = path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tokenizer = BertTokenizer(vocab_file=str(vocab), do_lower_case=True)
    extra: dict = {"problem_type": "regression"} if num_labels == 1 else {
        "id2label": dict(enumerate(labels)), "label2id": {n: i for i, n in enumerate(labels)}}
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                        num_labels=num_labels, **extra)
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def reference_scores(path: Path, texts: list[str], index: int | None = None) -> list[float]:
    """The model's scores one text at a time, straight through transformers (what the
    batched scorer must reproduce)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
    limit = min(512, model.config.max_position_embeddings)
    out = []
    with torch.inference_mode():
        for text in texts:
            logits = model(**tok(text, return_tensors="pt", truncation=True, max_length=limit)).logits[0]
            out.append(float(logits[0]) if index is None else float(torch.softmax(logits, -1)[index]))
    return out
