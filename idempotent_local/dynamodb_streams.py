"""DynamoDB Streams for the emulator: a table's streams as DynamoDB keeps them, over moto 5.2.5's one shard.

What DynamoDB does (``UpdateTable``, ``DescribeStream``, ``GetShardIterator``, ``GetRecords``):

- enabling a stream creates a *new* stream: a new label (the time, to the millisecond), so a new
  ``LatestStreamArn``, and a new shard; enabling it while it is enabled is refused (``ResourceInUse``);
- disabling it closes it: ``StreamStatus`` ``DISABLED``, its shard gets an ``EndingSequenceNumber``, writes
  are no longer recorded; its records stay readable through its ARN (for 24 hours in AWS: here, until the
  table goes), and ``DescribeTable`` still names it as the latest stream;
- reading a closed shard to its end gives no ``NextShardIterator``.

Moto 5.2.5 keeps one shard per table: disabling leaves it recording and ``ENABLED``, enabling again is refused
(its test is whether a stream label was ever set), and every stream of every table has the same shard id.
The functions here replace moto's; the ``stream-disable-and-re-enable`` patch
(:mod:`idempotent_local.patches`) installs them. A table's streams are kept on it, by label, beside moto's
``stream_shard`` (the enabled one, or None: moto records writes only when it is set).
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from moto.dynamodb.exceptions import ResourceNotFoundException, StreamAlreadyEnabledException
from moto.dynamodb.models.table import StreamShard, Table
from moto.dynamodbstreams.models import ShardIterator

STREAM_VIEW_TYPES = ("KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES")
RECORD_VERSION = "1.1"  # DynamoDB Streams' record format (moto writes 1.0)


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
    if shard is None:
        raise ResourceNotFoundException(f"Requested resource not found: Stream: {arn} not found")
    return shard


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
    backend.shard_iterators[iterator.arn] = iterator
    return iterator


def records_read(iterator: ShardIterator, result: dict[str, Any]) -> dict[str, Any]:
    """``GetRecords``' answer ``result`` of ``iterator``: without a next iterator once a closed shard is read
    to its end."""
    end = vars(iterator.stream_shard).get("end")
    if end is None:
        return result
    records = result.get("Records") or []
    following = int(records[-1]["dynamodb"]["SequenceNumber"]) + 1 if records else iterator.sequence_number
    if following >= end:
        result.pop("NextShardIterator", None)
    return result


def record_fields(record: Any, table: Table) -> None:
    """A new stream record as DynamoDB writes it: ``eventVersion`` 1.1, the table's region (moto: 1.0 and
    ``us-east-1`` whatever the region)."""
    record.record["eventVersion"] = RECORD_VERSION
    record.record["awsRegion"] = table.region_name


__all__ = [
    "STREAM_VIEW_TYPES",
    "describe_stream",
    "get_shard_iterator",
    "record_fields",
    "records_read",
    "set_stream_specification",
    "streams",
    "update_table_streams",
]
