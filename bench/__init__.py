"""firstwrite's benchmark suite: ``python -m bench`` (``make bench``) writes BENCHMARKS.md."""
