"""The stream: a binlog range read into a change batch. ``extract.extract_range`` splits a range
at file starts into parts read by worker processes; ``binlog_stream`` is the binlog as events from
a position (mysql-replication; compressed events inflated by ``compressed``); ``binlog_capture``
turns events into batch content (rows, DDL parsed by ``ddl``, GTIDs); ``failover`` finds a
checkpoint's place in another leader's binlog."""
