"""The web UI's aggregation: the fold of every process's reports (``fold.py``) and the
consumer group that runs it into compacted topics (``aggregator.py``)."""
