"""What emitting costs.

:func:`measure`: DynamoDB write units the outbox adds to the consumer's transaction, and the relay's requests
per emitted message. moto in-process: an orders consumer in transaction mode (one write and one emit per
message, 10-message batches over 10 groups), the table's stream read as Lambda hands it to the relay in
10-record batches, a FIFO topic as the target.

:func:`measure_contention`: emitting consumers' commits per second when every source group emits to one
downstream group, against one downstream group each, and the transaction conflicts per commit. DynamoDB is
:class:`~benchmarks.instruments.ContendedStubber`: a round trip of milliseconds, off the GIL, and
``TransactionConflict`` for a transaction touching an item another in-flight transaction writes (moto
serializes every request and never refuses one for that).

:func:`lane_ceiling`: what one downstream group can carry at all. Its outbox items share a partition key, and
a partition takes about :data:`PARTITION_WRITE_UNITS_PER_SECOND`: divided by one emit's write units."""

from __future__ import annotations

import io
import json
import math
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

REGION = "us-east-1"
TABLE = "orders"
TOPIC = "payments.fifo"
MESSAGES = 100
STREAM_BATCH = 10
# DynamoDB: a transactional write of an item costs 2 write units per KB (rounded up) of the item.
TRANSACTIONAL_UNITS_PER_KB = 2
# DynamoDB: one partition takes about 1,000 write units a second; past it writes are throttled, or the
# partition is split for heat (by sort key range: a lane's items then come from two shards).
PARTITION_WRITE_UNITS_PER_SECOND = 1000


@dataclass
class OutboxCost:
    emitted: int
    outbox_write_units: int  # the outbox items' Puts in the consumer's transactions
    transaction_write_units: int  # the processor's writes and the marker, as without emitting
    relay_publish_requests: int
    relay_dynamodb_requests: int
    published: int

    @property
    def write_units_per_emit(self) -> float:
        return self.outbox_write_units / self.emitted

    @property
    def publish_requests_per_emit(self) -> float:
        return self.relay_publish_requests / self.emitted

    @property
    def relay_dynamodb_per_emit(self) -> float:
        return self.relay_dynamodb_requests / self.emitted


def lane_ceiling(cost: OutboxCost) -> float:
    """Emitting commits a second that one downstream group (one partition key) takes at most."""
    return PARTITION_WRITE_UNITS_PER_SECOND / cost.write_units_per_emit


def _order_lines(lane_of: Callable[[str], str] | None = None) -> Callable[[Any], list[dict[str, Any]]]:
    """The processor: a Put of the message's order line, and its emit to the downstream group ``lane_of``
    gives the source group (None: emit's default)."""

    def process(message: Any) -> list[dict[str, Any]]:
        line = message.json_object()
        lane = {} if lane_of is None else {"group_id": lane_of(message.group_id)}
        message.emit({"order": line["x"], "line": line["y"], "cents": 250}, **lane)
        item = {"pk": {"S": f"order#{line['x']}"}, "sk": {"S": f"line#{line['y']}"}, "cents": {"N": "250"}}
        return [{"Put": {"Item": item}}]

    return process


def _stream_records(dynamodb: Any) -> list[dict[str, Any]]:
    """The table's stream as Lambda hands it to a function."""
    import boto3

    from idempotent_local.events import lambda_dynamodb_record

    arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    return [lambda_dynamodb_record(r, arn) for r in streams.get_records(ShardIterator=iterator)["Records"]]


def _transactional_units(item: dict[str, Any]) -> int:
    from idempotent_runtime.attributes import item_size

    return TRANSACTIONAL_UNITS_PER_KB * max(1, math.ceil(item_size(item) / 1024))


def measure() -> OutboxCost:
    import boto3
    from idempotent_runtime.config import Config
    from idempotent_runtime.contract import OUTBOX_ATTRIBUTE, Mode
    from idempotent_runtime.flow import build_handler
    from idempotent_runtime.outbox import OUTBOX_PARTITION_PREFIX, stream_filters
    from idempotent_runtime.relay import Relay, RelayConfig
    from moto import mock_aws

    from benchmarks.contenders import create_our_table
    from benchmarks.events import sqs_record
    from idempotent_local.event_filter import matches

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        stream = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
        create_our_table(dynamodb, TABLE, StreamSpecification=stream)
        sns = boto3.client("sns", region_name=REGION)
        topic = sns.create_topic(Name=TOPIC, Attributes={"FifoTopic": "true"})["TopicArn"]
        units = {"outbox": 0, "transaction": 0}

        def count_units(params: dict[str, Any], **_: Any) -> None:
            for entry in params.get("TransactItems", []):
                ((_, body),) = entry.items()
                item = body.get("Item") or body.get("Key") or {}
                outbox = item.get("pk", {}).get("S", "").startswith(OUTBOX_PARTITION_PREFIX)
                if outbox:
                    units["outbox"] += _transactional_units(item)
                    continue
                # The marker records where the outbox items are: what that adds is the outbox's too.
                without = {name: value for name, value in item.items() if name != OUTBOX_ATTRIBUTE}
                units["transaction"] += _transactional_units(without)
                units["outbox"] += _transactional_units(item) - _transactional_units(without)

        dynamodb.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", count_units)
        handler = build_handler(
            # One group at a time: moto's in-process stream is not safe across threads.
            Config(table_name=TABLE, mode=Mode.TRANSACTION, emit_target_arn=topic, max_workers=1),
            dynamodb_client=dynamodb,
            processor=_order_lines(),
            log_stream=io.StringIO(),
        )
        for start in range(0, MESSAGES, 10):
            lines = [
                (json.dumps({"x": f"o-{n}", "y": "1"}), f"g-{n % 10}", n) for n in range(start, start + 10)
            ]
            batch = [sqs_record(body, group, n, uuid.uuid4().hex) for body, group, n in lines]
            assert handler({"Records": batch}, None) == {"batchItemFailures": []}
        # What the relay's event filter lets through: writes of outbox items.
        patterns = [json.dumps(pattern) for pattern in stream_filters("pk", "sk", "")]
        records = [r for r in _stream_records(dynamodb) if matches(patterns, r)]
        calls = {"publish": 0, "entries": 0, "dynamodb": 0}

        def count_publish(params: dict[str, Any], **_: Any) -> None:
            calls["publish"] += 1
            calls["entries"] += len(params["PublishBatchRequestEntries"])

        def count_dynamodb(**_: Any) -> None:
            calls["dynamodb"] += 1

        sns.meta.events.register("provide-client-params.sns.PublishBatch", count_publish)
        # Every client made meanwhile (the relay makes its own lazily) reports its DynamoDB requests.
        previous = boto3.DEFAULT_SESSION
        boto3.setup_default_session()
        assert boto3.DEFAULT_SESSION is not None
        boto3.DEFAULT_SESSION.events.register("before-send.dynamodb.*", count_dynamodb)
        dynamodb.meta.events.register("before-send.dynamodb.*", count_dynamodb)
        try:
            relay = Relay(RelayConfig(target_arn=topic), target_client=sns, log_stream=io.StringIO())
            for start in range(0, len(records), STREAM_BATCH):
                response = relay({"Records": records[start : start + STREAM_BATCH]})
                assert response == {"batchItemFailures": []}, response
        finally:
            boto3.DEFAULT_SESSION = previous
        return OutboxCost(
            emitted=MESSAGES,
            outbox_write_units=units["outbox"],
            transaction_write_units=units["transaction"],
            relay_publish_requests=calls["publish"],
            relay_dynamodb_requests=calls["dynamodb"],
            published=calls["entries"],
        )


# --- contention: one downstream group against ten --------------------------------------------------------

CONTENTION_TARGET = f"arn:aws:sns:{REGION}:123456789012:{TOPIC}"
SOURCE_GROUPS = 10
MAX_DELIVERIES = 50  # of one batch: a record still failing then fails the benchmark, it does not spin
LANES = {"one_downstream_group": lambda group: "warehouse", "ten_downstream_groups": lambda group: group}


@dataclass
class Contention:
    """Per layout of :data:`LANES`: commits, wall seconds and conflicts (refused transactions), summed over
    the rounds."""

    delay_s: float
    commits: Counter[str] = field(default_factory=Counter)
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    conflicts: Counter[str] = field(default_factory=Counter)
    invocations: Counter[str] = field(default_factory=Counter)

    def commits_per_second(self, lanes: str) -> float:
        return self.commits[lanes] / self.seconds[lanes]

    def conflicts_per_commit(self, lanes: str) -> float:
        return self.conflicts[lanes] / self.commits[lanes]


def _commit_all(handler: Any, event: dict[str, Any]) -> int:
    """Deliver ``event``, then what failed again (Lambda's partial batch response, SQS redelivering it at
    once), until every record committed; the invocations it took."""
    from benchmarks.events import redelivery
    from benchmarks.instruments import FakeLambdaContext

    invocations = 0
    while event["Records"]:
        invocations += 1
        if invocations > MAX_DELIVERIES:
            raise RuntimeError(
                f"{len(event['Records'])} records still failed after {MAX_DELIVERIES} deliveries"
            )
        failed = {f["itemIdentifier"] for f in handler(event, FakeLambdaContext())["batchItemFailures"]}
        event = redelivery(event, failed)
    return invocations


def measure_contention(*, delay_s: float = 0.010, rounds: int = 3, batches: int = 5) -> Contention:
    """Each round, for each layout of :data:`LANES` (alternating which goes first): ``batches`` batches of
    :data:`SOURCE_GROUPS` new messages, one per source group, processed side by side (MAX_WORKERS 10), each
    committing a Put, its emit and the marker; records that failed (a transaction cancelled four times in
    a row) are delivered again until all committed. Wall time includes the runtime's backoff between
    attempts."""
    from idempotent_runtime.clients import create_client
    from idempotent_runtime.config import Config
    from idempotent_runtime.contract import Mode
    from idempotent_runtime.flow import build_handler

    from benchmarks.events import fifo_batch
    from benchmarks.instruments import ContendedStubber
    from benchmarks.runtime_bench import isolated_aws_environment, quiet_output, rotated

    out = Contention(delay_s=delay_s)
    handlers = {}
    with isolated_aws_environment():
        for lanes, lane_of in LANES.items():
            client = create_client("dynamodb")
            stub = ContendedStubber(client, {"transact_write_items": {}}, delay_s)
            stub.activate()
            config = Config(
                table_name=TABLE, mode=Mode.TRANSACTION, emit_target_arn=CONTENTION_TARGET, max_workers=10
            )
            handler = build_handler(config, dynamodb_client=client, processor=_order_lines(lane_of))
            handlers[lanes] = (handler, stub)
    with quiet_output():
        for handler, _ in handlers.values():  # warm-up: lazy imports, connection pools
            _commit_all(handler, fifo_batch(SOURCE_GROUPS, SOURCE_GROUPS))
        for round_index in range(rounds):
            for lanes in rotated(list(LANES), round_index):
                handler, stub = handlers[lanes]
                events = [fifo_batch(SOURCE_GROUPS, SOURCE_GROUPS) for _ in range(batches)]
                conflicts, calls = stub.conflicts, stub.calls["TransactWriteItems"]
                start = time.perf_counter()
                invocations = sum(_commit_all(handler, event) for event in events)
                out.seconds[lanes] += time.perf_counter() - start
                out.invocations[lanes] += invocations
                out.conflicts[lanes] += stub.conflicts - conflicts
                out.commits[lanes] += stub.calls["TransactWriteItems"] - calls
    return out
