"""The real local services tests, the demo and the benchmarks start (``local_services`` is their
front: its names and its CLI). One module per service, and ``process`` for what they share."""
