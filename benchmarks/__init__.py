"""Benchmarks: the idempotent runtime and constructs side by side with Powertools and plain aws-cdk-lib.

`python benchmarks/run.py` (or `make bench`) writes results.json, results.md and
results.png next to this file.
Every ratio is taken inside one run, alternating the contenders, because the machines are shared and noisy.
"""
