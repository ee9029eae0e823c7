"""Training inputs: token shards and their index, the one streaming loader (documents or whole conversations packed into rows, mixture, elastic resume), preference pairs, a synthetic corpus."""
