"""Parity with Hugging Face PEFT: our exported LoRA adapter, loaded by ``peft`` onto the
Qwen3-layout export of its base, gives our logits (float32, CPU) within 1e-4, unmerged
and after PEFT's ``merge_and_unload``. The values it prints are the ones stored in
``tests/unit/model/test_lora.py::PEFT_LOGITS``. Needs the ``hf`` extra (torch,
transformers, peft); skipped with a message otherwise."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

from afm.model.checkpoints.adapter_io import save_adapter
from afm.model.checkpoints.checkpoint import load_model, save_params
from afm.model.checkpoints.hf_export import export_hf, export_peft
from afm.model.initializer import init_model
from afm.model.on_device import lora

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch", reason="PEFT parity needs torch (pip install 'afm[hf]')")
transformers = pytest.importorskip("transformers", reason="PEFT parity needs transformers (pip install 'afm[hf]')")
peft = pytest.importorskip("peft", reason="PEFT parity needs peft (pip install 'afm[hf]')")

# The adapter the stored values in test_lora.py were made with: one construction for both.
from tests.unit.model.test_lora import PEFT_LOGITS, TINY32, random_adapter  # noqa: E402


@pytest.mark.parametrize("targets", [lora.ALL_TARGETS, ("q", "v", "down")])
def test_peft_loads_our_adapter_and_matches_our_logits(tmp_path, targets) -> None:
    base = save_params(init_model(TINY32, 0), tmp_path / "base")
    config = lora.LoraConfig(rank=4, alpha=8, targets=targets)
    adapter_dir = save_adapter(random_adapter(TINY32, config, seed=7), tmp_path / "adapter",
                               base=base, base_config=TINY32)
    hf_base = export_hf(base, tmp_path / "hf")
    hf_adapter = export_peft(adapter_dir, tmp_path / "hf-adapter", base_model=str(hf_base), dtype="float32")
    assert json.loads((hf_adapter / "adapter_config.json").read_text())["peft_type"] == "LORA"

    tokens = np.random.RandomState(11).randint(0, TINY32.vocab_size, (1, 8))
    ours_model, _ = load_model(adapter_dir)  # base + the stored (float16) adapter, unmerged
    ours = np.asarray(ours_model(jnp.asarray(tokens)))

    hf = transformers.AutoModelForCausalLM.from_pretrained(str(hf_base), dtype=torch.float32)
    with torch.no_grad():
        plain = hf(torch.tensor(tokens)).logits.numpy()
    model = peft.PeftModel.from_pretrained(hf, str(hf_adapter))
    model.eval()
    n_lora = sum(1 for name, _ in model.named_modules() if name.endswith("lora_A"))
    assert n_lora == len(targets) * TINY32.n_layers  # every adapted projection, no other
    with torch.no_grad():
        theirs = model(torch.tensor(tokens)).logits.numpy()
        merged = model.merge_and_unload()(torch.tensor(tokens)).logits.numpy()
    assert np.abs(theirs - plain).max() > 1e-2  # the adapter changes the output
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)
    np.testing.assert_allclose(ours, merged, atol=1e-4, rtol=0)
    if targets == lora.ALL_TARGETS:  # the fast tier's stored values are PEFT's today
        print("PEFT_LOGITS =", [round(float(x), 6) for x in theirs[0, -1, :6]])
        np.testing.assert_allclose(theirs[0, -1, :6], PEFT_LOGITS, atol=2e-6, rtol=0)
