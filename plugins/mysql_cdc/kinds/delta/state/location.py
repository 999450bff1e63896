"""Where a Delta Lake follower's tables and state are, and how each engine reaches them.

The leader's table ``db.t`` is the Delta table ``<location>/<db>/<t>``; the pipeline's state is
under ``<location>/_mysql_cdc/<pipeline>/``, a database name capture never mirrors (it is the
reserved schema, ``contracts.RESERVED_SCHEMA``), so no leader table can land on it.

A location is a ``StorageSpec`` (``file:///abs/path`` or ``s3://bucket/prefix`` with the S3
options the batch store takes). delta-rs (``deltalake``, the Airflow side and the readers) and
Spark's Delta writer (the merge job, through Hadoop's S3A) spell the same place and the same
credentials differently; this module is the one place that knows both spellings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar
from urllib.parse import urlparse

from ....contracts import RESERVED_SCHEMA, BinlogPosition
from ....storage import StorageSpec, storage_retry

T = TypeVar("T")

STATE_PREFIX = RESERVED_SCHEMA


def position_version(position: BinlogPosition) -> int:
    """A binlog position as one increasing 64-bit number, the ``txnVersion`` a table's commit for
    the changes up to that position carries: Delta skips a commit whose version is at or below
    the last one recorded for its ``txnAppId``, which is "at or before the table's position"."""
    if position.offset >= 10**12:
        raise ValueError(f"binlog offset {position.offset} of {position} is beyond a 1 TB binlog file")
    return position.sequence * 10**12 + position.offset


# delta-rs's words for a connection that broke: object_store retries a 5xx answer for up to its
# ``retry_timeout``, but not an answer whose body breaks off (reading a log or data file), nor a
# write whose connection was reset once it was sent (it may have landed), hence ``lake_retry``. A
# 5xx is not retried here again: retries of retries would make an outage minutes long.
_BROKEN = re.compile(r"error reading a body|body error|connection reset|broken pipe|connection closed",
                     re.IGNORECASE)


def transient_lake_error(exc: BaseException) -> str | None:
    """What made a delta-rs call fail, when a retry here may fix it (None: it will not: a 4xx
    answer such as 403 AccessDenied, a missing table, a conflict; or a 5xx object_store retried
    already)."""
    text = str(exc)
    if not isinstance(exc, OSError) or re.search(r"status [45]\d\d", text):
        return None
    found = _BROKEN.search(text)
    return f"{type(exc).__name__}: ...{found.group(0)}..." if found else None


def lake_retry(what: str, call: Callable[[], T]) -> T:
    """``call()`` (delta-rs opening, reading or committing a table) retried as the batch store's
    requests are (``storage.storage_retry``, logged), while it fails with a
    ``transient_lake_error``. Only for calls a retry cannot double: a read, or a commit that
    checks its transaction id (or replaces what it wrote) when run again."""
    return storage_retry(what, call, transient_lake_error)


@dataclass(frozen=True)
class LakeLocation:
    spec: StorageSpec

    @classmethod
    def from_json(cls, body: Mapping[str, Any], where: str = "location") -> "LakeLocation":
        return cls(StorageSpec.from_json(body, where))

    @property
    def uri(self) -> str:
        return self.spec.uri

    def table_uri(self, database: str, table: str) -> str:
        """The Delta table of the leader's ``database.table`` (delta-rs spelling)."""
        return f"{self.uri}/{database}/{table}"

    def state_uri(self, pipeline: str, name: str) -> str:
        """One of a pipeline's state tables (``checkpoint``, ``history``, ...)."""
        return f"{self.uri}/{STATE_PREFIX}/{pipeline}/{name}"

    def changelog_uri(self, pipeline: str, database: str, table: str) -> str:
        """The changelog table of the leader's ``database.table`` (``kinds.delta.sink.changelog``)."""
        return f"{self.uri}/{STATE_PREFIX}/{pipeline}/changelog/{database}/{table}"

    # -- delta-rs -----------------------------------------------------------------------------------

    def storage_options(self) -> dict[str, str]:
        """delta-rs's ``storage_options`` for this location (none for a local path)."""
        if self.spec.scheme != "s3":
            return {}
        options = self.spec.options
        names = {"endpoint_url": "AWS_ENDPOINT_URL", "region_name": "AWS_REGION",
                 "aws_access_key_id": "AWS_ACCESS_KEY_ID", "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
                 "aws_session_token": "AWS_SESSION_TOKEN"}
        found = {names[k]: str(v) for k, v in options.items() if k in names and v}
        if found.get("AWS_ENDPOINT_URL", "").startswith("http://"):
            found["AWS_ALLOW_HTTP"] = "true"  # an S3-compatible endpoint on a private network (MinIO)
        # Every writer of a pipeline's state runs one at a time (Airflow runs one DAG run of a
        # pipeline at a time, and its tasks in order), so delta-rs's commit needs no lock service.
        found["AWS_S3_ALLOW_UNSAFE_RENAME"] = "true"
        # object_store retries a 5xx answer or a dropped connection itself; set, not left to its
        # defaults: 6 tries within 30 s from 0.2 s of backoff, and a 60 s limit per request
        found.update({"max_retries": "5", "retry_timeout": "30s", "backoff_config.init_backoff": "200ms",
                      "backoff_config.max_backoff": "3s", "timeout": "60s"})
        return found

    # -- Spark (Hadoop's S3A) ---------------------------------------------------------------------

    def spark_path(self, uri: str) -> str:
        """A URI of this location as Spark's Hadoop filesystems spell it (``s3a://``)."""
        return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri

    def hadoop_conf(self) -> dict[str, str]:
        """The S3A settings of this location's bucket (per-bucket keys, so the batch store's and
        the lake's buckets can differ). Set at run time from the job's secrets file, never on the
        spark-submit command line."""
        if self.spec.scheme != "s3":
            return {}
        bucket = urlparse(self.uri).netloc
        options = self.spec.options
        prefix = f"fs.s3a.bucket.{bucket}."
        conf = {}
        endpoint = options.get("endpoint_url")
        if endpoint:
            conf[prefix + "endpoint"] = endpoint
            conf[prefix + "path.style.access"] = "true"  # MinIO, moto: no virtual-host buckets
            conf[prefix + "connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
        if options.get("region_name"):
            conf[prefix + "endpoint.region"] = options["region_name"]
        # S3A retries a 5xx answer or a dropped connection itself, on top of the AWS SDK's own
        # tries (the one kept low, as hadoop-aws advises); set, not left to the defaults of
        # whichever hadoop-aws the cluster has (which retry a 503 for minutes)
        conf.update({prefix + "attempts.maximum": "2", prefix + "retry.limit": "4", prefix + "retry.interval": "500ms",
                     prefix + "retry.throttle.limit": "4", prefix + "retry.throttle.interval": "500ms",
                     prefix + "connection.timeout": "60s"})
        if options.get("aws_access_key_id"):
            conf[prefix + "access.key"] = options["aws_access_key_id"]
            conf[prefix + "secret.key"] = options.get("aws_secret_access_key", "")
            if options.get("aws_session_token"):
                conf[prefix + "session.token"] = options["aws_session_token"]
                conf[prefix + "aws.credentials.provider"] = (
                    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider")
            else:
                conf[prefix + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        return conf
