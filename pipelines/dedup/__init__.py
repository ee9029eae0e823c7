"""Global exact + MinHash LSH de-duplication: the transform, its steps, node keys and the incremental index."""
