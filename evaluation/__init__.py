"""afm.evaluation: ``afm eval`` on lm-evaluation-harness, with a native JAX backend.

* ``engine`` — packed scoring and KV-cache decoding on a device mesh (tokens only).
* ``harness`` — ``--model afm``: lm-eval's LM interface on the engine.
* ``suite`` / ``local_data`` — the report's task groups, each readable from local files.
* ``sandbox`` / ``code_metrics`` — locked-down execution of generated programs (HumanEval).
* ``perplexity``, ``niah``, ``coverage`` — held-out perplexity, synthetic long context,
  decontamination coverage.
* ``runner``, ``results``, ``report`` — one evaluation run, its JSON, tables and plots.
* ``hook`` — a small task group as a training-time eval hook.

Heavy imports (JAX, lm-eval) happen inside the modules that need them; importing the
package itself is free.
"""
