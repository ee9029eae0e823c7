"""Comparisons of several runs that end in a table and a plot, behind commands: optimizer comparison, SFT mixture sweep, on-device ablation report, recovery table, RL curves."""
