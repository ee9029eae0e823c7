"""``--model afm``: lm-evaluation-harness's model interface on the native JAX engine.

lm-eval owns tasks, prompts, few-shot sampling, filters and metrics; this class only turns
its three request types into token work for :class:`afm.evaluation.engine.InferenceEngine`, with
the same tokenization, truncation and stop rules as lm-eval's own ``hf`` backend, so the
two agree request for request on an exported model (the parity tests check it):

* ``loglikelihood``: context/continuation split as ``TemplateLM`` does (trailing spaces of
  the context move to the continuation; empty context -> the prefix token, BOS), inputs
  ``(context + continuation)[-(max_length + 1):][:-1]``.
* ``loglikelihood_rolling``: lm-eval's disjoint rolling windows with BOS as prefix.
* ``generate_until``: contexts left-truncated to ``max_length - max_gen_toks``; the EOS
  token and the ``until`` strings stop a row; the text is cut at the first stop string.

Importing this module registers ``afm`` in lm-eval's model registry.
"""

from __future__ import annotations

import json
import logging
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import (
    handle_stop_sequences,
    normalize_gen_kwargs,
    postprocess_generated_text,
)
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from tqdm import tqdm

from afm.evaluation.engine import InferenceEngine
from afm.evaluation.packing import ScoreRequest
from afm.model.distributed.sharding import MeshConfig, make_mesh
from afm.model.text.tokenizer import Tokenizer
from afm.model.transformer import with_config

DEFAULT_MAX_GEN_TOKS = 256


def find_tokenizer(checkpoint: str | os.PathLike[str], tokenizer: str | None) -> Path:
    """The tokenizer directory: the one given, else ``CKPT/tokenizer`` (``afm import hf``
    puts it there), else ``CKPT/../tokenizer``."""
    if tokenizer:
        return Path(tokenizer)
    ck = Path(checkpoint)
    for cand in (ck / "tokenizer", ck.parent / "tokenizer"):
        if (cand / "tokenizer.model").is_file():
            return cand
    raise ValueError(f"no tokenizer found for {checkpoint}: pass tokenizer=DIR")


@register_model("afm")
class AfmLM(TemplateLM):
    """An afm checkpoint (or an in-memory model) as an lm-eval ``LM``.

    ``model_args`` (``--model_args`` on lm-eval's command line): ``checkpoint`` (required
    unless ``model`` is given), ``tokenizer`` (directory), ``dtype`` (float32 | bfloat16),
    ``max_length``, ``tokens_per_batch`` (scoring batch size in tokens), ``batch_size``
    (prompts decoded together), ``chunk`` (decode steps between stop checks),
    ``mesh`` (``DATAxFSDPxTENSORxSEQUENCE``, e.g. ``2x1x4x1``), ``share_prefix`` (score
    the continuations of one context on one pass over the context; default true).
    """

    backend = "causal"
    uses_torch = False  # lm-eval need not seed (and import) torch for this backend

    def __init__(
        self,
        checkpoint: str | None = None,
        tokenizer: Any = None,
        *,
        model: Any = None,
        dtype: str = "float32",
        max_length: int | None = None,
        tokens_per_batch: int | None = None,
        batch_size: int | str | None = 16,
        chunk: int = 16,
        mesh: str | None = None,
        add_bos_token: bool = False,
        share_prefix: bool = True,
        show_progress: bool = True,
        **unused: Any,
    ) -> None:
        super().__init__()

        gen_batch = 16 if batch_size in (None, "auto") or str(batch_size).startswith("auto") else int(batch_size)
        mesh_obj = _parse_mesh(mesh) if mesh else None
        engine_kw = dict(tokens_per_batch=int(tokens_per_batch) if tokens_per_batch else None, gen_batch=gen_batch,
                         chunk=int(chunk), mesh=mesh_obj)
        if model is not None:
            if dtype and model.cfg.dtype != dtype:
                model = with_config(model, dtype=dtype)
            self.engine = InferenceEngine(model, max_length=max_length and int(max_length), **engine_kw)
            self.checkpoint = "<in-memory model>"
        elif checkpoint:
            self.engine = InferenceEngine.from_checkpoint(
                checkpoint, dtype=dtype, max_length=max_length and int(max_length), **engine_kw)
            self.checkpoint = str(checkpoint)
        else:
            raise ValueError("--model afm needs model_args checkpoint=DIR (and tokenizer=DIR)")
        if isinstance(tokenizer, Tokenizer):
            self.tok = tokenizer
        else:
            self.tok = Tokenizer.load(find_tokenizer(checkpoint or ".", tokenizer))
        if self.tok.vocab_size > self.engine.cfg.vocab_size:
            raise ValueError(f"tokenizer has {self.tok.vocab_size} pieces, the model only "
                             f"{self.engine.cfg.vocab_size} embedding rows")
        self.add_bos_token = bool(add_bos_token) if not isinstance(add_bos_token, str) else add_bos_token.lower() == "true"
        self.show_progress = show_progress
        self.choices: dict[tuple[str, int], int] = {}  # (task, item) -> answers offered (loglikelihood)
        self.share_prefix = share_prefix if not isinstance(share_prefix, str) else share_prefix.lower() == "true"
        self._eos_text = self.tok.id_to_piece(self.tok.eos_id)
        self.clamped_generation = False

    # -- the TemplateLM contract --------------------------------------------------------
    @property
    def eot_token_id(self) -> int:
        return self.tok.eos_id

    @property
    def prefix_token_id(self) -> int:
        return self.tok.bos_id

    @property
    def max_length(self) -> int:
        return self.engine.max_length

    @property
    def max_gen_toks(self) -> int:
        return DEFAULT_MAX_GEN_TOKS

    @property
    def tokenizer_name(self) -> str:
        return str(self.tok.path)

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs: Any) -> list[int]:
        bos = self.add_bos_token if add_special_tokens is None else bool(add_special_tokens) and self.add_bos_token
        return self.tok.encode(string, bos=bos)

    def tok_decode(self, tokens: list[int]) -> str:
        return self.tok.decode(tokens)

    def loglikelihood(self, requests: list, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """lm-eval's scoring, noting how many answers each item offers (a multiple-choice
        item asks one request per choice): the chance level the results report."""
        for req in requests:
            key = (req.task_name, req.doc_id)
            self.choices[key] = max(self.choices.get(key, 0), int(req.idx) + 1)
        return super().loglikelihood(requests, disable_tqdm=disable_tqdm)

    def _progress(self, total: int, desc: str) -> tqdm:
        return tqdm(total=total, desc=desc, disable=not self.show_progress, leave=False)

    def _loglikelihood_tokens(self, requests: list, disable_tqdm: bool = False, **kwargs: Any
                              ) -> list[tuple[float, bool]]:
        L = self.max_length
        by_context: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for i, (_key, context_enc, continuation_enc) in enumerate(requests):
            if not continuation_enc:
                raise ValueError("loglikelihood: empty continuation")
            if len(continuation_enc) > L:
                raise ValueError(f"continuation of {len(continuation_enc)} tokens exceeds max_length {L}")
            if self.share_prefix and len(context_enc) >= 2 and len(context_enc) + len(continuation_enc) <= L + 1:
                by_context[tuple(context_enc)].append(i)
        shared = {i for idx in by_context.values() if len(idx) > 1 for i in idx}
        packed: list[int] = []
        work = []
        for i, (_key, context_enc, continuation_enc) in enumerate(requests):
            if i in shared:
                continue
            whole = (list(context_enc) + list(continuation_enc))[-(L + 1):]
            work.append(ScoreRequest(tuple(whole[:-1]), tuple(whole[1:]), len(continuation_enc)))
            packed.append(i)
        prefixes: list[tuple[int, ...]] = []
        items: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = []
        owners: list[int] = []
        for ctx, idx in by_context.items():
            if len(idx) < 2:
                continue
            prefixes.append(ctx[:-1])
            for i in idx:
                cont = tuple(requests[i][2])
                items.append((len(prefixes) - 1, (ctx[-1],) + cont[:-1], cont))
                owners.append(i)
        results: list[tuple[float, bool]] = [(0.0, False)] * len(requests)
        with self._progress(len(requests), "afm loglikelihood") as bar:
            update = None if disable_tqdm else bar.update
            for i, res in zip(packed, self.engine.score(work, progress=update)):
                results[i] = res
            if items:
                for i, res in zip(owners, self.engine.score_shared(prefixes, items, progress=update)):
                    results[i] = res
        for (key, _c, _t), res in zip(requests, results):
            if key is not None:
                self.cache_hook.add_partial("loglikelihood", key, res)
        return results

    def loglikelihood_rolling(self, requests: list, disable_tqdm: bool = False) -> list[float]:
        windows: list[tuple[int, list[int], list[int]]] = []
        for i, (string,) in enumerate(req.args for req in requests):
            for ctx, cont in map(make_disjoint_window, get_rolling_token_windows(
                    token_list=self.tok_encode(string), prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length, context_len=1)):
                windows.append((i, ctx, cont))
        scores = self._loglikelihood_tokens([(None, c, t) for _, c, t in windows], disable_tqdm)
        totals = [0.0] * len(requests)
        for (i, _c, _t), (lp, _g) in zip(windows, scores):
            totals[i] += lp
        for req, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", req.args, total)
        return totals

    def generate_until(self, requests: list, disable_tqdm: bool = False) -> list[str]:
        """Greedy (or sampled) continuations, grouped by identical generation settings."""
        groups: dict[str, list[int]] = defaultdict(list)
        for i, req in enumerate(requests):
            groups[json.dumps(req.args[1], sort_keys=True, default=str)].append(i)
        out = [""] * len(requests)
        with self._progress(len(requests), "afm generate_until") as bar:
            for members in groups.values():
                gen_kwargs = requests[members[0]].args[1]
                texts = self._generate_group([requests[i].args[0] for i in members], gen_kwargs,
                                             None if disable_tqdm else bar.update)
                for i, text in zip(members, texts):
                    out[i] = text
                    self.cache_hook.add_partial("generate_until", requests[i].args, text)
        return out

    def _generate_group(self, contexts: list[str], gen_kwargs: dict, progress: Any) -> list[str]:
        kwargs = normalize_gen_kwargs(dict(gen_kwargs), self.max_gen_toks)
        until = handle_stop_sequences(kwargs.pop("until", None), eos=self._eos_text)
        max_gen = int(kwargs.pop("max_gen_toks"))
        if max_gen >= self.max_length:
            # lm-eval's hf backend refuses; a small-context checkpoint is still worth a look.
            clamped = max(1, self.max_length // 2)
            logging.getLogger(__name__).warning(
                "max_gen_toks %d does not fit the model's context of %d tokens; generating %d",
                max_gen, self.max_length, clamped)
            self.clamped_generation = True
            max_gen = clamped
        max_ctx = self.max_length - max_gen
        prompts = [self.tok_encode(c)[-max_ctx:] or [self.prefix_token_id] for c in contexts]
        stops = [s for s in until if s]

        def is_finished(_i: int, toks: list[int]) -> bool:
            text = self.tok.decode(toks)
            return any(s in text for s in stops)

        temperature = float(kwargs.get("temperature", 0.0) or 0.0) if kwargs.get("do_sample") else 0.0
        new = self.engine.generate(
            prompts, max_new_tokens=max_gen, stop_token_ids=[self.eot_token_id],
            is_finished=is_finished if stops else None, temperature=temperature,
            top_p=float(kwargs.get("top_p", 1.0) or 1.0), seed=int(kwargs.get("seed", 0) or 0),
            pad_id=self.tok.pad_id, progress=progress,
        )
        return [postprocess_generated_text(self.tok.decode(t), until, None) for t in new]

    def get_model_info(self) -> dict[str, Any]:
        cfg = self.engine.cfg
        return {"model_checkpoint": self.checkpoint, "model_config": cfg.name, "model_dtype": cfg.dtype}


def _parse_mesh(spec: str) -> Any:
    """``"2x1x4x1"`` (data x fsdp x tensor x sequence; ``-1`` = the rest) -> a device mesh.
    No commas or ``=``: lm-eval splits ``model_args`` on both."""

    try:
        sizes = [int(x) for x in spec.lower().split("x")]
    except ValueError:
        raise ValueError(f"mesh: expected DATAxFSDPxTENSORxSEQUENCE such as 2x1x4x1, got {spec!r}") from None
    if len(sizes) != 4:
        raise ValueError(f"mesh: expected four sizes DATAxFSDPxTENSORxSEQUENCE, got {spec!r}")
    return make_mesh(MeshConfig(*sizes))
