"""`dlq list|show|redrive --function RELAY`: the outbox relay's dead-letter queue and the way back.

Orders (transaction mode) commits three lines, each emitting a payment to the payments queue, while its relay
is down. Lambda gives the batch up (``RecordAgeExceeded``: the outage outlived the stream, or retries ran
out) and puts its description - not its messages - in the relay's DLQ. A redrive publishes the batch's
committed messages from the stream while it holds them, else from the table by commit time, with their
deduplication ids, each group in commit order; the DLQ ends empty, a second redrive changes nothing. An
entry the target refused is published again from its outbox item (or from the dead letter once the item has
expired) when the target takes it; one it still refuses stays, with the reason."""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

import boto3
import pytest
from dlq_helpers import (
    FAKE,
    Hops,
    client,
    consume,
    consumer,
    deploy_hops,
    dlq,
    drain,
    endpoint,
    peek,
    publish,
)
from idempotent_runtime.message import Key
from idempotent_runtime.outbox import (
    LEGACY_OUTBOX_SORT,
    OUTBOX_MESSAGES_ATTRIBUTE,
    OUTBOX_SORT_PREFIX,
    dedup_id,
    stream_filters,
)
from idempotent_runtime.outbox import OUTBOX_EMITTER_ATTRIBUTE as EMITTER
from idempotent_runtime.relay import Relay, RelayConfig

from idempotent_local.event_filter import matches
from idempotent_local.events import lambda_dynamodb_record, stream_invocation_record

pytestmark = pytest.mark.usefixtures("cloud")

LINES = [("o-1", "1", 2500), ("o-2", "1", 700), ("o-1", "2", 5)]


def order_and_pay(message: Any) -> list[dict[str, Any]]:
    """orders: the line, and a payment request for it, in one transaction."""
    line = message.json_object()
    payment = {"order_id": line["order_id"], "line_id": line["line_id"], "cents": line["cents"]}
    message.emit(payment, group_id=line["order_id"])
    item = {"pk": {"S": f"line#{line['order_id']}"}, "sk": {"S": line["line_id"]}}
    return [{"Put": {"Item": item}}]


def _committed(hops: Hops, *, late: float = 0) -> None:
    """The three lines committed by orders (the relay down: nothing published); with ``late``, o-2's commit
    came ``late`` seconds after the time in its sort key (as 0.4 took it: once, before retrying)."""
    for order, line, cents in LINES:
        body = json.dumps({"order_id": order, "line_id": line, "cents": cents})
        publish(hops.orders, body, group=order)
        handler = consumer(hops.orders, order_and_pay)
        if late and order == "o-2":
            handler = _consumer(hops, clock=lambda: time.time() - late)
        assert [outcome for _, outcome in consume(hops.orders, handler)] == ["processed"]


def _consumer(hops: Hops, clock: Any, dynamodb: Any = None) -> Any:
    """orders' bundled handler with its own clock (and DynamoDB client)."""
    from idempotent_runtime.config import Config
    from idempotent_runtime.flow import build_handler

    return build_handler(
        Config.from_env(hops.orders.environment),
        dynamodb_client=dynamodb or client("dynamodb"),
        sqs_client=client("sqs"),
        processor=order_and_pay,
        clock=clock,
        sleep=lambda _: None,
    )


def _stream(hops: Hops) -> tuple[str, str, list[dict[str, Any]]]:
    """The orders table's stream: its ARN, its shard, and its outbox records as Lambda hands them out."""
    table = hops.orders.table
    arn = client("dynamodb").describe_table(TableName=table)["Table"]["LatestStreamArn"]
    streams = client("dynamodbstreams")
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    patterns = [json.dumps(p) for p in stream_filters("pk", "sk", "")]  # the relay's event filter
    given = [lambda_dynamodb_record(r, arn) for r in records]
    outbox = [r for r in given if matches(patterns, r)]
    return arn, shard["ShardId"], outbox


def _given_up(hops: Hops, *, stream_arn: str | None = None, of: str = "") -> dict[str, Any]:
    """Lambda's on-failure record of the batch of every outbox record (``of``: of those whose keys hold that
    text), in the relay's DLQ."""
    arn, shard, records = _stream(hops)
    records = [r for r in records if of in json.dumps(r["dynamodb"]["Keys"])]
    for record in records:
        record["eventSourceARN"] = stream_arn or arn
    given_up = stream_invocation_record(
        records,
        shard_id=shard,
        function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{hops.relay}",
        condition="RecordAgeExceeded",
        invocations=0,
        request_id="r-1",
        function_error=None,
        at=datetime.datetime.now(datetime.UTC),
    )
    client("sqs").send_message(QueueUrl=hops.relay_dlq_url, MessageBody=json.dumps(given_up))
    return given_up


def _payments(hops: Hops) -> list[tuple[str, str, str]]:
    """(group, deduplication id, body) of what reached the payments queue, in its order."""
    found = []
    for message in drain(hops.payments.queue_url):
        found.append(
            (
                message["Attributes"]["MessageGroupId"],
                message["Attributes"]["MessageDeduplicationId"],
                message["Body"],
            )
        )
    return found


def _expected(hops: Hops) -> list[tuple[str, str, str]]:
    table = hops.orders.table
    return [
        (
            order,
            dedup_id(table, Key(order, line), 0),
            json.dumps({"order_id": order, "line_id": line, "cents": cents}, separators=(",", ":")),
        )
        for order, line, cents in LINES
    ]


def _by_group(found: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for group, dedup, _ in found:
        groups.setdefault(group, []).append(dedup)
    return groups


def _relay_dlq(hops: Hops) -> list[dict[str, Any]]:
    return drain(hops.relay_dlq_url)


def test_a_batch_lambda_gave_up_is_published_again_from_the_stream_in_order_and_leaves_the_dlq(cloud):
    hops = deploy_hops()
    _committed(hops)
    _given_up(hops)
    where = ("--stack", hops.stack, "--function", hops.relay)

    code, listed = dlq("list", *where)
    assert code == 0, listed.error
    assert any(
        "batch: shard" in line and "RecordAgeExceeded" in line and "(3 record(s))" in line
        for line in listed.lines
    ), listed.lines

    code, checked = dlq("redrive", *where, "--dry-run")
    assert code == 0, checked.error
    assert sum("would publish" in line for line in checked.lines) == 4, checked.lines  # 3 messages + tally
    assert drain(hops.payments.queue_url) == []

    code, redriven = dlq("redrive", *where)
    assert code == 0, redriven.error
    assert any("published 3; deleted from the DLQ" in line for line in redriven.lines), redriven.lines
    found = _payments(hops)
    assert sorted(found) == sorted(_expected(hops))
    assert _by_group(found) == _by_group(_expected(hops))  # each group in commit order
    assert _relay_dlq(hops) == []

    code, again = dlq("redrive", *where)
    assert code == 0, again.error
    assert "no message" in again.lines
    assert drain(hops.payments.queue_url) == []


@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("list", ("--group", "o-1")),
        ("list", ("--reason", "permanent")),
        ("list", ("--messages",)),
        ("redrive", ("--reason-text", "RecordAge")),
        ("redrive", ("--rate", "5")),
    ],
)
def test_a_consumer_dlq_option_that_means_nothing_on_the_relays_is_refused_not_ignored(
    cloud, command, option
):
    """A filter the relay's DLQ cannot apply would otherwise redrive (or list) every entry: refused, naming
    it, and nothing moves."""
    hops = deploy_hops()
    _committed(hops)
    _given_up(hops)
    code, refused = dlq(command, "--stack", hops.stack, "--function", hops.relay, *option)
    assert code != 0
    named = f"error: {option[0]}: not an option on an outbox relay's dead-letter queue"
    assert refused.error.startswith(named), refused.error
    assert drain(hops.payments.queue_url) == []
    (left,) = _relay_dlq(hops)
    assert "RecordAgeExceeded" in json.dumps(left)


def test_a_batch_the_stream_no_longer_holds_is_published_from_the_table_by_commit_time(cloud):
    hops = deploy_hops()
    _committed(hops)
    gone = "arn:aws:dynamodb:us-east-1:123456789012:table/gone/stream/2026-01-01T00:00:00.000"
    _given_up(hops, stream_arn=gone)

    code, redriven = dlq("redrive", "--stack", hops.stack, "--function", hops.relay)

    assert code == 0, redriven.error
    assert any("the stream no longer holds the batch" in line for line in redriven.lines), redriven.lines
    # o-1's two lines committed within a second: the table cannot tell their order, and says so.
    unknown = (
        "1 of them committed within 13 s of the one before in their group, an order the table cannot tell"
    )
    assert any(unknown in line for line in redriven.lines), redriven.lines
    found = _payments(hops)
    assert sorted(found) == sorted(_expected(hops))
    assert _by_group(found) == _by_group(_expected(hops))
    assert _relay_dlq(hops) == []


GONE = "arn:aws:dynamodb:us-east-1:123456789012:table/gone/stream/2026-01-01T00:00:00.000"


def test_a_batch_item_committed_70_s_after_the_time_in_its_key_is_found_in_the_table_and_published(cloud):
    """0.4 took an outbox item's time once, before the commit, and guarded mode may retry a commit for long:
    a record arriving 70 s after the time in its key is still the batch's, and published."""
    hops = deploy_hops()
    _committed(hops, late=70)
    _given_up(hops, stream_arn=GONE)

    code, redriven = dlq("redrive", "--stack", hops.stack, "--function", hops.relay)

    assert code == 0, redriven.lines
    assert any("published 3; deleted from the DLQ" in line for line in redriven.lines), redriven.lines
    assert sorted(_payments(hops)) == sorted(_expected(hops))
    assert _relay_dlq(hops) == []


def test_a_batch_the_table_holds_only_part_of_is_published_as_far_as_found_and_stays_saying_what_is_missing(
    cloud,
):
    hops = deploy_hops()
    _committed(hops)
    given_up = _given_up(hops, stream_arn=GONE)
    expired = next(
        i
        for i in client("dynamodb").scan(TableName=hops.orders.table)["Items"]
        if i["sk"]["S"].startswith(OUTBOX_SORT_PREFIX) and "o-2" in i["pk"]["S"]
    )
    client("dynamodb").delete_item(
        TableName=hops.orders.table, Key={"pk": expired["pk"], "sk": expired["sk"]}
    )
    where = ("--stack", hops.stack, "--function", hops.relay)

    code, checked = dlq("redrive", *where, "--dry-run")
    assert any("would stay: the batch had 3 record(s), the table holds 2" in line for line in checked.lines)
    code, redriven = dlq("redrive", *where)

    assert code == 1
    assert any(line.endswith(": published 2") for line in redriven.lines), redriven.lines
    assert any(
        "kept: not every message of it was found: the batch had 3 record(s), the table holds 2" in line
        for line in redriven.lines
    ), redriven.lines
    assert sorted(_payments(hops)) == sorted(e for e in _expected(hops) if e[0] == "o-1")
    # items known gone: the entry is their last trace, --force does not delete it
    code, forced = dlq("redrive", *where, "--force", "--yes")
    assert code == 1, forced.lines
    assert any("kept: not every message of it was found" in line for line in forced.lines), forced.lines
    assert [json.loads(m["Body"]) for m in _relay_dlq(hops)] == [given_up]


def test_a_batch_whose_items_may_have_expired_stays_though_other_batches_items_fill_its_window(
    cloud, monkeypatch
):
    """A batch of o-2's record alone; its item expired, o-1's (another batch's, committed in the same
    minutes) are still there and as many as the batch's size. The count cannot tell: once an item of the
    window can have outlived its TTL, the entry stays, saying so."""
    from idempotent_runtime.outbox import OUTBOX_TTL_SECONDS

    from idempotent_cli.dlq import relayed

    hops = deploy_hops()
    _committed(hops)
    given_up = _given_up(hops, stream_arn=GONE, of="o-2")
    assert given_up["DDBStreamBatchInfo"]["batchSize"] == 1
    (o2,) = [r for r in _stream(hops)[2] if "o-2" in json.dumps(r["dynamodb"]["Keys"])]
    key = {"pk": o2["dynamodb"]["Keys"]["pk"], "sk": o2["dynamodb"]["Keys"]["sk"]}
    client("dynamodb").delete_item(TableName=hops.orders.table, Key=key)  # expired by its TTL
    later = time.time() + OUTBOX_TTL_SECONDS
    monkeypatch.setattr(relayed, "_now", lambda: later)
    where = ("--stack", hops.stack, "--function", hops.relay)

    code, checked = dlq("redrive", *where, "--dry-run")
    assert any("would stay: outbox items committed since" in line for line in checked.lines), checked.lines
    code, redriven = dlq("redrive", *where)

    assert code == 1
    assert any(line.endswith(": published 2") for line in redriven.lines), redriven.lines
    assert any(
        "may have expired by their TTL (48 h after their commit): the table cannot show that it still holds "
        "every record of the batch" in line
        for line in redriven.lines
    ), redriven.lines
    assert sorted(_payments(hops)) == sorted(e for e in _expected(hops) if e[0] == "o-1")
    assert [json.loads(m["Body"]) for m in peek(hops.relay_dlq_url)] == [given_up]
    # --force asks first (no terminal here: refused, nothing changed)
    code, unconfirmed = dlq("redrive", *where, "--force")
    assert code != 0 and "Pass --yes to confirm" in unconfirmed.error, unconfirmed.error
    assert [json.loads(m["Body"]) for m in peek(hops.relay_dlq_url)] == [given_up]
    code, previewed = dlq("redrive", *where, "--force", "--dry-run")
    assert any("would be deleted (--force), though: outbox items" in line for line in previewed.lines), (
        previewed.lines
    )
    # the operator, satisfied that o-2 reached payments otherwise, lets it go
    code, forced = dlq("redrive", *where, "--force", "--yes")
    assert code == 0, forced.lines
    assert any("deleted from the DLQ (--force, though outbox items" in line for line in forced.lines), (
        forced.lines
    )
    assert _relay_dlq(hops) == []
    assert _payments(hops) == []  # o-1's again: absorbed by the target's deduplication


def test_a_group_is_published_from_the_table_in_commit_order_after_a_throttled_commit(
    cloud,
):
    """o-1 line 1's commit is throttled for 40 s while line 2 commits: the group is published in commit
    order (line 2, then line 1) - as the stream held it."""
    from botocore.exceptions import ClientError

    hops = deploy_hops()
    shift = {"s": 0.0}

    def clock() -> float:
        return time.time() + shift["s"]

    def throttle(**_: Any) -> None:
        if shift["s"] == 0:
            shift["s"] = 20
            body = json.dumps({"order_id": "o-1", "line_id": "2", "cents": 5})
            publish(hops.orders, body, group="o-1/2")  # another source group, the same downstream group
            assert [o for _, o in consume(hops.orders, _consumer(hops, clock))] == ["processed"]
            shift["s"] = 40
            error = {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}
            raise ClientError({"Error": error}, "TransactWriteItems")

    dynamodb = boto3.session.Session(**FAKE).client("dynamodb", endpoint_url=endpoint())
    dynamodb.meta.events.register("before-call.dynamodb.TransactWriteItems", throttle)
    publish(hops.orders, json.dumps({"order_id": "o-1", "line_id": "1", "cents": 2500}), group="o-1/1")
    assert [o for _, o in consume(hops.orders, _consumer(hops, clock, dynamodb))] == ["processed"]
    in_the_stream = [
        r["dynamodb"]["NewImage"][OUTBOX_MESSAGES_ATTRIBUTE]["L"][0]["M"] for r in _stream(hops)[2]
    ]
    _given_up(hops, stream_arn=GONE)

    code, redriven = dlq("redrive", "--stack", hops.stack, "--function", hops.relay)

    assert code == 0, redriven.lines
    table = hops.orders.table
    assert (
        [dedup for _, dedup, _ in _payments(hops)]
        == [m["dedup_id"]["S"] for m in in_the_stream]
        == [
            dedup_id(table, Key("o-1", "2"), 0),
            dedup_id(table, Key("o-1", "1"), 0),
        ]
    )


def test_a_batch_whose_items_are_not_in_the_table_stays_with_the_reason(cloud):
    hops = deploy_hops()
    _committed(hops)
    given_up = _given_up(hops, stream_arn="arn:aws:dynamodb:us-east-1:123456789012:table/gone/stream/x")
    for item in client("dynamodb").scan(TableName=hops.orders.table)["Items"]:
        if item["sk"]["S"].startswith(OUTBOX_SORT_PREFIX):  # expired by their TTL
            client("dynamodb").delete_item(
                TableName=hops.orders.table, Key={"pk": item["pk"], "sk": item["sk"]}
            )

    code, redriven = dlq("redrive", "--stack", hops.stack, "--function", hops.relay)

    assert code == 1
    assert any("kept: no outbox record of this batch found" in line for line in redriven.lines), (
        redriven.lines
    )
    assert drain(hops.payments.queue_url) == []
    assert [json.loads(m["Body"]) for m in _relay_dlq(hops)] == [given_up]


class Refusing:
    """A target that refuses every publish for good (a broken key policy, a deleted queue re-created...)."""

    class meta:
        endpoint_url = "http://localhost"

    def send_message_batch(self, **_: Any) -> dict:
        from botocore.exceptions import ClientError

        raise ClientError(
            {"Error": {"Code": "InvalidParameterValue", "Message": "refused"}}, "SendMessageBatch"
        )


def _refused(hops: Hops) -> None:
    """The relay ran while the target refused everything: each message dead-lettered with its item."""
    _, _, records = _stream(hops)
    environment = client("lambda").get_function_configuration(FunctionName=hops.relay)["Environment"][
        "Variables"
    ]
    relay = Relay(RelayConfig.from_env(environment), target_client=Refusing(), sqs_client=client("sqs"))
    assert relay({"Records": records}) == {"batchItemFailures": []}


def test_entries_the_target_refused_are_published_once_it_takes_them_from_item_or_dead_letter(cloud):
    hops = deploy_hops()
    _committed(hops)
    _refused(hops)
    where = ("--stack", hops.stack, "--function", hops.relay)
    code, listed = dlq("list", *where)
    assert code == 0 and sum("unpublishable: dedup id" in line for line in listed.lines) == 3, listed.lines
    # One item expired meanwhile: that message comes from its dead letter.
    table = hops.orders.table
    items = [
        i
        for i in client("dynamodb").scan(TableName=table)["Items"]
        if i["sk"]["S"].startswith(OUTBOX_SORT_PREFIX)
    ]
    expired = next(i for i in items if "o-2" in i["pk"]["S"])
    client("dynamodb").delete_item(TableName=table, Key={"pk": expired["pk"], "sk": expired["sk"]})

    code, limited = dlq("redrive", *where, "--limit", "1")
    assert code == 0, "\n".join(limited.lines)
    first = _payments(hops)
    assert len(first) == 1 and len(peek(hops.relay_dlq_url)) == 2  # --limit 1: one entry, the others stay
    code, redriven = dlq("redrive", *where)
    assert code == 0, "\n".join(redriven.lines)

    lines = limited.lines + redriven.lines
    assert sum("; deleted from the DLQ" in line for line in lines) == 3, lines
    assert sum("the dead letter (its outbox item is gone)" in line for line in lines) == 1, lines
    assert sorted(first + _payments(hops)) == sorted(_expected(hops))
    assert _relay_dlq(hops) == []


def test_an_entry_the_target_still_refuses_stays_with_the_reason(cloud):
    hops = deploy_hops()
    _committed(hops)
    table = hops.orders.table
    # A message SNS and SQS never take (a control character), as 0.3 or a hand-written item could hold.
    item = next(
        i
        for i in client("dynamodb").scan(TableName=table)["Items"]
        if i["sk"]["S"].startswith(OUTBOX_SORT_PREFIX) and "o-2" in i["pk"]["S"]
    )
    item["sk"] = {"S": item["sk"]["S"] + "-by-hand"}
    poison = item[OUTBOX_MESSAGES_ATTRIBUTE]["L"][0]["M"]
    poison["body"]["S"], poison["dedup_id"]["S"] = "pay \x01 700", "by-hand-1"
    client("dynamodb").put_item(TableName=table, Item=item)
    _refused(hops)

    code, redriven = dlq("redrive", "--stack", hops.stack, "--function", hops.relay)

    assert code == 1
    kept = [line for line in redriven.lines if "kept:" in line]
    assert len(kept) == 1 and "still refused: SNS and SQS would refuse it" in kept[0], redriven.lines
    assert sorted(_payments(hops)) == sorted(_expected(hops))
    (left,) = _relay_dlq(hops)
    assert (
        json.loads(left["MessageAttributes"]["idempotency.details"]["StringValue"])["dedup_id"] == "by-hand-1"
    )


def test_a_dead_lettered_03_message_whose_item_a_later_emit_replaced_is_published_from_the_dead_letter(cloud):
    """0.3 kept one item per group, replaced by every emit: the item no longer holds the dead letter's
    message at its position. The redrive publishes what the dead letter names, checked by its id."""
    hops = deploy_hops()
    table = hops.orders.table

    def emitted_by_03(body: str, dedup: str) -> dict[str, Any]:
        return {
            "pk": {"S": "idempotency#outbox#o-1"},
            "sk": {"S": LEGACY_OUTBOX_SORT},
            OUTBOX_MESSAGES_ATTRIBUTE: {"L": [{"M": {"body": {"S": body}, "dedup_id": {"S": dedup}}}]},
            "idempotency:group": {"S": "o-1"},
            "idempotency:message_id": {"S": "m-" + dedup},
        }

    client("dynamodb").put_item(TableName=table, Item=emitted_by_03("pay o-1 line 1", "o-1#1#000"))
    _refused(hops)  # dead-lettered, its position (0) and id in the details
    client("dynamodb").put_item(TableName=table, Item=emitted_by_03("pay o-1 line 2", "o-1#2#000"))

    code, redriven = dlq("redrive", "--stack", hops.stack, "--function", hops.relay)

    assert code == 0, redriven.lines
    assert _payments(hops) == [("o-1", "o-1#1#000", "pay o-1 line 1")]
    assert any(
        "the dead letter (its outbox item holds another message at 0 now)" in x for x in redriven.lines
    )
    assert _relay_dlq(hops) == []


def _record(pk: str, sk: str, image: dict[str, Any], event: str = "INSERT") -> dict[str, Any]:
    return {"eventName": event, "dynamodb": {"Keys": {"pk": {"S": pk}, "sk": {"S": sk}}, "NewImage": image}}


OWN = {EMITTER: {"S": "shopidempotency#outbox#"}}
RECORDS = [
    _record("shopidempotency#outbox#o-1", "idempotency#outbox#1795000000000#shopo-1#1", OWN),
    _record("shopidempotency#outbox#o-1", "idempotency#outbox#1795000000000#shopo-1#1", OWN, "REMOVE"),
    _record("shopidempotency#outbox#o-1", "idempotency#outbox", {}),  # 0.3's item
    _record(
        "shopidempotency#outbox#o-1", "idempotency#outbox", {"idempotency:token": {"S": "t"}}
    ),  # a marker
    _record(
        "idempotency#outbox#o-1",
        "idempotency#outbox#1795000000000#o-1#1",
        {EMITTER: {"S": "idempotency#outbox#"}},
    ),
    _record("shopidempotency#outbox#o-1", "idempotency#outbox#1", {}),  # another consumer's marker
    _record("shopo-1", "line#1", {}),
]


@pytest.mark.parametrize(
    ("record", "relayed"), list(zip(RECORDS, [True, False, True, False, False, False, False], strict=True))
)
def test_the_tools_read_the_stream_through_the_relays_own_filter_as_lambda_applies_it(record, relayed):
    """The redrive reads the stream through the relay's filter (stream_filters), applied as the local cloud
    applies Lambda's event filters."""
    assert matches([json.dumps(p) for p in stream_filters("pk", "sk", "shop")], record) == relayed
