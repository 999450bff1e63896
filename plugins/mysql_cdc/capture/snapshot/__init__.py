"""The snapshot: existing tables copied consistently with a binlog position. ``leader_snapshot``
reads a table in chunks inside one consistent read view; ``copy.snapshot_tables`` plans the chunks,
copies them in parallel worker processes, resumes an interrupted copy, and catches each chunk up
with the stream to one position."""
