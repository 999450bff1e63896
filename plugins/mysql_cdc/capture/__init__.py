"""Capture: the leader's changes into change batches. ``stream/`` reads a binlog range,
``snapshot/`` copies existing tables at a known position; what both share is here: the leader
server (``leader``: positions, binlog files, preflight checks), table filters, the closed world
of events and their errors (``events``), column types and the reference row converters
(``types``, ``rows``), the compiled decoder's caller (``native``, through ``native_core``), and the
batch writers (``change_batch``, ``table_changes``, ``packs``), run in worker processes
(``workers``)."""
