"""The quality stage and what makes and measures it: the rules, the model-based filter and its
scorers, the word n-gram model, the shipped model's recipe, and the audit's good texts, junk
and topics.

Import the submodules; this package imports nothing."""
