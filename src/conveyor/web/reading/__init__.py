"""The web UI's reading side: the tail of its topics that the pages read (``data.py``), the
explorer (any topic, no consumer group) and the dead letter queues."""
