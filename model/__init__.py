"""afm.model: the AFM transformer (Flax NNX), its tokenizer, sampling, checkpoints, export.

Public API (import the submodules; this package imports nothing heavy so ``afm --help``
stays instant and a training host needs only the JAX stack):

* ``afm.model.config``: ``ModelConfig``, ``CONFIGS``, ``get_config``, ``param_counts``,
  ``flops_per_token`` (and the muParam-simple choices, documented there).
* ``afm.model.transformer``: ``Transformer(cfg, rngs=...)``, ``KVCache``; ``afm.model.initializer.init_model`` (a random model, one compiled program per block).
* ``afm.model.attention``: the attention kernels (XLA reference, cuDNN, TPU splash) and
  their sharded layout; ``resolve_backend``.
* ``afm.model.remat``: named activation save points and remat policies, memory estimates.
* ``afm.model.distributed.partitioning``: logical activation sharding hints (no-ops without a mesh).
* ``afm.model.inference.sampling``: ``generate`` / ``sample`` (KV cache, greedy/temperature/top-p).
* ``afm.model.inference.scoring``: ``token_logprobs`` (differentiable), ``score_tokens``.
* ``afm.model.checkpoints.checkpoint``: ``save_params``, ``load_model``, ``load_params_into``.
* ``afm.model.text.tokenizer``: ``train_tokenizer``, ``Tokenizer``.
* ``afm.model.checkpoints.hf_export``: ``export_hf``, ``import_hf`` (Qwen3 layout).
"""
