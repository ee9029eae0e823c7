"""Post-training data: SFT datasets (chat format checks, PII, decontamination, dedup,
tokenization with the chat template) and synthetic data generation (math, code, tool use)
with pluggable generators (our checkpoint, or an OpenAI-compatible HTTP endpoint)."""
