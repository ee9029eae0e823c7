"""From a large model to the on-device one: Soft-Top-K, pruning, the teacher, distillation targets, quantization."""
