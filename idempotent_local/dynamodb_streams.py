"""DynamoDB Streams for the emulator: a table's streams as DynamoDB keeps them, over moto 5.2.5's one shard.

What DynamoDB does (``UpdateTable``, ``DescribeStream``, ``GetShardIterator``, ``GetRecords``):

- enabling a stream creates a *new* stream: a new label (the time, to the millisecond), so a new
  ``LatestStreamArn``, and a new shard; enabling it while it is enabled is refused (``ResourceInUse``);
- disabling it closes it: ``StreamStatus`` ``DISABLED``, its shard gets an ``EndingSequenceNumber``, writes
  are no longer recorded; it stays listed (``ListStreams``) and readable through its ARN for 24 hours, and
  ``DescribeTable`` still names it as the latest stream;
- reading a closed shard to its end gives no ``NextShardIterator``;
- a record stays in its stream 24 hours (:data:`RETENTION_SECONDS`): ``TRIM_HORIZON`` starts at the oldest
  record still held, and an iterator at or after an older sequence number, or one that falls behind while
  it waits, is refused with ``TrimmedDataAccessException``.

Moto 5.2.5 keeps one shard per table: disabling leaves it recording and ``ENABLED``, enabling again is refused
(its test is whether a stream label was ever set), every stream of every table has the same shard id, a
stream vanishes from ``ListStreams`` once another replaces it, and records stay as long as the table. The
functions here replace moto's; the ``stream-disable-and-re-enable`` and ``stream-retention`` patches
(:mod:`idempotent_local.patches`) install them. A table's streams are kept on it, by label, beside moto's
``stream_shard`` (the enabled one, or None: moto records writes only when it is set).

**Time.** Retention is judged by the emulator's clock (:mod:`idempotent_local.clock`), which a test or a
user moves ahead (``local age``): moving it N seconds makes every record already written N seconds older,
and a stream closed N seconds earlier. Records keep their ``ApproximateCreationDateTime`` (when they were
written); records written afterwards are new.
"""

from __future__ import annotations

import bisect
import datetime
import time
import uuid
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.dynamodb.exceptions import ResourceNotFoundException, StreamAlreadyEnabledException
from moto.dynamodb.models.table import StreamShard, Table
from moto.dynamodbstreams.models import ShardIterator

from idempotent_local.clock import CLOCK

RECORD_VERSION = "1.1"  # DynamoDB Streams' record format (moto writes 1.0)
RETENTION_SECONDS = 24 * 3600  # DynamoDB Streams keeps a record, and a closed stream, 24 hours


class TrimmedDataAccessException(JsonRESTError):
    """An iterator at a record the stream no longer holds (DynamoDB Streams' error)."""

    def __init__(self, message: str) -> None:
        super().__init__("com.amazonaws.dynamodb.v20120810#TrimmedDataAccessException", message)


def _trimmed(shard: Any) -> int:
    """How many of the shard's first records the stream no longer holds (older than 24 hours)."""
    cutoff = CLOCK.now() - RETENTION_SECONDS
    return bisect.bisect_right(shard.items, cutoff, key=lambda record: vars(record).get("written_at", 0.0))


def trim_horizon(shard: Any) -> int:
    """The sequence number of the shard's oldest record still held (or of its next record)."""
    return int(shard.starting_sequence_number) + _trimmed(shard)


def _held(shard: Any) -> bool:
    """Whether the stream of ``shard`` still exists: enabled, or closed less than 24 hours ago."""
    closed = vars(shard).get("closed_at")
    return closed is None or CLOCK.now() - closed < RETENTION_SECONDS


def streams(table: Table) -> dict[str, StreamShard]:
    """Every stream the table has had, by label, oldest first (one shard each)."""
    return vars(table).setdefault("_streams", {})  # type: ignore[no-any-return]


def _label(table: Table) -> str:
    """A new stream's label: the time in UTC to the millisecond, as DynamoDB writes it, never one the table
    already used."""
    moment = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    while True:
        label = moment.isoformat(timespec="milliseconds")
        if label not in streams(table):
            return label
        moment += datetime.timedelta(milliseconds=1)


def _enable(table: Table, view_type: str) -> None:
    shard = StreamShard(table.account_id, table)
    shard.id = f"shardId-{int(time.time() * 1000):020d}-{uuid.uuid4().hex[:8]}"
    label = _label(table)
    vars(shard).update(label=label, view_type=view_type, end=None)
    streams(table)[label] = shard
    table.stream_shard = shard
    table.latest_stream_label = label
    table.stream_specification = {"StreamEnabled": True, "StreamViewType": view_type}


def _close(shard: Any) -> None:
    """No more records: ``end`` is the sequence number a next record would have had."""
    shard.end = shard.starting_sequence_number + len(shard.items)
    shard.closed_at = CLOCK.now()


def set_stream_specification(table: Table, specification: dict[str, Any] | None) -> None:
    """``Table.set_stream_specification``: enable a new stream, or close the enabled one."""
    wanted = bool(specification) and bool(
        specification.get("StreamEnabled") or specification.get("StreamViewType")  # type: ignore[union-attr]
    )
    if wanted:
        _enable(table, specification["StreamViewType"])  # type: ignore[index]
        return
    if table.stream_shard is not None:
        _close(table.stream_shard)
    table.stream_shard = None
    table.stream_specification = {"StreamEnabled": False}


def update_table_streams(backend: Any, table: Table, specification: dict[str, Any]) -> None:
    """``DynamoDBBackend.update_table_streams``: enabling is refused only while a stream is enabled."""
    enabling = specification.get("StreamEnabled") or specification.get("StreamViewType")
    if enabling and table.stream_shard is not None:
        raise StreamAlreadyEnabledException
    set_stream_specification(table, specification)


def _stream(table: Table, arn: str) -> Any:
    shard = streams(table).get(arn.rsplit("/stream/", 1)[-1])
    if shard is None or not _held(shard):
        raise ResourceNotFoundException(f"Requested resource not found: Stream: {arn} not found")
    return shard


def listed_arns(table: Table) -> list[str]:
    """The ARNs of the table's streams that still exist (the enabled one, and those closed less than 24
    hours ago), oldest first."""
    return [f"{table.table_arn}/stream/{label}" for label, shard in streams(table).items() if _held(shard)]


def list_streams(backend: Any, table_name: str | None = None) -> list[dict[str, Any]]:
    """``ListStreams``: every stream that still exists, also a closed one (moto lists only the latest)."""
    return [
        {"StreamArn": arn, "TableName": table.name, "StreamLabel": arn.rsplit("/stream/", 1)[-1]}
        for table in backend.dynamodb.tables.values()
        if table_name is None or table.name == table_name
        for arn in listed_arns(table)
    ]


def describe_stream(backend: Any, arn: str) -> dict[str, Any]:
    """``DescribeStream`` of any stream of the table, enabled or closed."""
    table = backend._get_table_from_arn(arn)
    shard = _stream(table, arn)
    sequence_range = {"StartingSequenceNumber": str(shard.starting_sequence_number)}
    if shard.end is not None:  # a closed shard: its last record's (the first, when it has none)
        last = max(shard.end - 1, shard.starting_sequence_number)
        sequence_range["EndingSequenceNumber"] = str(last)
    return {
        "StreamArn": arn,
        "StreamLabel": shard.label,
        "StreamStatus": "ENABLED" if shard is table.stream_shard else "DISABLED",
        "StreamViewType": shard.view_type,
        "CreationRequestDateTime": shard.created_on,
        "TableName": table.name,
        "KeySchema": table.schema,
        "Shards": [{"ShardId": shard.id, "SequenceNumberRange": sequence_range}],
    }


def get_shard_iterator(
    backend: Any, arn: str, shard_id: str, shard_iterator_type: str, sequence_number: str | None = None
) -> ShardIterator:
    """``GetShardIterator`` on the shard of the stream the ARN names (moto: always the table's latest)."""
    shard = _stream(backend._get_table_from_arn(arn), arn)
    if shard.id != shard_id:
        raise ResourceNotFoundException(f"Requested resource not found: Shard: {shard_id} in Stream: {arn}")
    iterator = ShardIterator(backend, shard, shard_iterator_type, sequence_number)  # type: ignore[arg-type]
    horizon = trim_horizon(shard)
    if shard_iterator_type == "TRIM_HORIZON":
        iterator.sequence_number = horizon
    elif iterator.sequence_number < horizon:
        raise TrimmedDataAccessException(
            f"Requested sequence number {sequence_number} is older than the shard's trim horizon {horizon} "
            "(stream records are kept 24 hours)"
        )
    backend.shard_iterators[iterator.arn] = iterator
    return iterator


def records_get(get: Any, iterator: ShardIterator, limit: int = 1000) -> dict[str, Any]:
    """``ShardIterator.get`` (``GetRecords``) around ``get``, moto's read: refused once the iterator's
    position has been trimmed while it waited, and without a next iterator once a closed shard is read to its
    end."""
    if iterator.sequence_number < trim_horizon(iterator.stream_shard):
        raise TrimmedDataAccessException(
            f"The records at sequence number {iterator.sequence_number} and after it up to "
            f"{trim_horizon(iterator.stream_shard) - 1} have left the stream (records are kept 24 hours)"
        )
    result = get(iterator, limit)
    end = vars(iterator.stream_shard).get("end")
    records = result.get("Records") or []
    following = int(records[-1]["dynamodb"]["SequenceNumber"]) + 1 if records else iterator.sequence_number
    if end is not None and following >= end:
        result.pop("NextShardIterator", None)
    return result


def expired(backend: Any, arn: str, shard_id: str, after: int | None) -> dict[str, Any] | None:
    """The records of a shard after sequence number ``after`` that the stream no longer holds, in
    ``GetRecords``' JSON (``ApproximateCreationDateTime`` in epoch seconds), and its trim horizon; None when
    the table, stream or shard does not exist."""
    table = backend.tables.get(arn.split(":", 5)[-1].split("/")[1] if arn.count(":") >= 5 else "")
    if table is None:
        return None
    shard = streams(table).get(arn.rsplit("/stream/", 1)[-1])
    if shard is None or shard.id != shard_id:
        return None
    first = 0 if after is None else max(0, after + 1 - int(shard.starting_sequence_number))
    records = []
    for record in shard.items[first : _trimmed(shard)]:
        as_json = dict(record.to_json())
        dynamodb = dict(as_json["dynamodb"])
        created = dynamodb["ApproximateCreationDateTime"]
        dynamodb["ApproximateCreationDateTime"] = created.replace(tzinfo=datetime.UTC).timestamp()
        records.append({**as_json, "dynamodb": dynamodb})
    held = trim_horizon(shard) < int(shard.starting_sequence_number) + len(shard.items)
    return {"Records": records, "TrimHorizon": str(trim_horizon(shard)) if held else None}


def record_fields(init: Any, record: Any, table: Table, *args: Any, **kwargs: Any) -> None:
    """``StreamRecord.__init__`` around ``init`` (moto's): a new stream record as DynamoDB writes it:
    ``eventVersion`` 1.1, the table's region (moto: 1.0 and ``us-east-1`` whatever the region), and when it
    was written by the streams' clock (for its retention)."""
    init(record, table, *args, **kwargs)
    record.record["eventVersion"] = RECORD_VERSION
    record.record["awsRegion"] = table.region_name
    record.written_at = CLOCK.now()


__all__ = [
    "RETENTION_SECONDS",
    "TrimmedDataAccessException",
    "describe_stream",
    "expired",
    "get_shard_iterator",
    "list_streams",
    "listed_arns",
    "record_fields",
    "records_get",
    "set_stream_specification",
    "streams",
    "update_table_streams",
]
