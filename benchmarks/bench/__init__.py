"""Building blocks of the Signal-vs-reader benchmark harness (see ``benchmarks/run.py``)."""
