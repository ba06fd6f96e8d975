"""The emulator's own control API, beside moto's (``/moto-api/local-cloud/...`` on the emulator's port): a
service of the emulator (:data:`SERVICE`), whose client is :class:`idempotent_local.control.Control`.

Not an AWS API: what the tools ask the emulator for in one request instead of many, and the hooks a test
uses to make time pass for the emulator.

- ``GET inventory``: what exists, per CloudFormation type that ``local status`` checks (queue names, topic,
  subscription and stream ARNs, table, function, alarm and role names, key states, each event source
  mapping's configuration), and each stack's notes on what the emulator did not model in its last operation,
  read from moto's backends in the emulator's process: ``local status`` checks every resource of every
  stack with it, whatever their number (one request per resource took minutes).
- ``GET clock`` / ``POST clock {"advance_seconds": N}``: the emulator's clock (:mod:`idempotent_local.clock`),
  which a test or a user moves ahead to make everything written so far N seconds older; the answer says how
  far it is ahead and what it ages (stream records leave a stream 24 hours after they were written, a FIFO
  queue forgets a deduplication id 5 minutes after its first send). ``streams/clock`` is the same clock.
- ``GET streams/expired?stream=ARN&shard=ID&after=SEQUENCE``: the records of a shard the stream no longer
  holds (written more than 24 hours ago by the emulator's clock), after a sequence number: what a stream
  mapping had not delivered when they expired. In AWS Lambda's poller reads a shard continuously, so it
  still holds the batch it gives up to the mapping's on-failure destination; the runner polls only while
  ``local run`` runs and reads them here.
- ``GET functions/code?function=ARN``: the zip of a function whose code the template gives inline
  (``Code.ZipFile``), which moto keeps in no bucket: where its ``GetFunction`` ``Code.Location`` leads
  (:func:`idempotent_local.control.code_location`; the ``code-location-served`` patch), so that ``local run``
  and ``local request`` run it as they run any other.

:func:`install` adds the routes (in the process that serves the emulator, before it starts).
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from idempotent_local.clock import CLOCK
from idempotent_local.emulator import Service
from idempotent_local.names import ACCOUNT_ID, CONTROL_PATH, NOTE_PREFIX, REGION


def _inventory() -> dict[str, Any]:
    from moto.awslambda.models import lambda_backends
    from moto.cloudformation.models import cloudformation_backends
    from moto.cloudwatch.models import cloudwatch_backends
    from moto.dynamodb.models import dynamodb_backends
    from moto.iam.models import iam_backends
    from moto.kms.models import kms_backends
    from moto.sns.models import sns_backends
    from moto.sqs.models import sqs_backends

    from idempotent_local import dynamodb_streams

    sns = sns_backends[ACCOUNT_ID][REGION]
    lambdas = lambda_backends[ACCOUNT_ID][REGION]
    tables = dynamodb_backends[ACCOUNT_ID][REGION].tables
    return {
        "AWS::SQS::Queue": sorted(sqs_backends[ACCOUNT_ID][REGION].queues),
        "AWS::SNS::Topic": sorted(sns.topics),
        "AWS::SNS::Subscription": sorted(sns.subscriptions),
        "AWS::DynamoDB::Table": sorted(tables),
        "AWS::Lambda::Function": sorted(f.function_name for f in lambdas.list_functions()),
        # each mapping as ListEventSourceMappings gives it (LastModified in epoch seconds)
        "AWS::Lambda::EventSourceMapping": {
            uuid: json.loads(json.dumps(esm.get_configuration(), default=str))
            for uuid, esm in lambdas._event_source_mappings.items()
        },
        "AWS::KMS::Key": {key.id: key.key_state for key in kms_backends[ACCOUNT_ID][REGION].keys.values()},
        "AWS::CloudWatch::Alarm": sorted(cloudwatch_backends[ACCOUNT_ID][REGION].alarms),
        "AWS::IAM::Role": sorted(role.name for role in iam_backends[ACCOUNT_ID]["aws"].roles.values()),
        "streams": sorted(arn for table in tables.values() for arn in dynamodb_streams.listed_arns(table)),
        "notes": {
            stack.name: stack_notes(stack.events, stack.name)
            for stack in cloudformation_backends[ACCOUNT_ID][REGION].stacks.values()
        },
    }


def stack_notes(events: list[Any], stack_name: str) -> list[str]:
    """The emulator's notes on a stack's last operation (its events since its last *_IN_PROGRESS), one per
    note and type, naming the resources it concerns. ``events`` are moto's, oldest first."""
    concerned: dict[tuple[str, str], list[str]] = {}
    for event in reversed(events):
        if event.logical_resource_id == stack_name and event.resource_status.endswith("_IN_PROGRESS"):
            break
        reason = event.resource_status_reason or ""
        if reason.startswith(NOTE_PREFIX):
            key = (event.resource_type, reason.removeprefix(NOTE_PREFIX))
            concerned.setdefault(key, []).insert(0, event.logical_resource_id)
    return [f"{', '.join(ids)} ({kind}): {note}" for (kind, note), ids in reversed(concerned.items())]


def _json(status: int, body: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def _query(full_url: str) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(full_url).query).items()}


def _body(request: Any, headers: Any) -> Any:
    """A request's JSON body (moto's server hands over a werkzeug request whose stream is unread)."""
    if hasattr(request, "environ"):
        size = int(headers.get("Content-Length") or 0)
        return json.loads(request.environ["wsgi.input"].read(size) or b"{}")
    return json.loads(request.body or b"{}")


def inventory(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], bytes]:
    return _json(200, _inventory())


def clock(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], bytes]:
    if request.method == "POST":
        try:
            CLOCK.advance(float(_body(request, headers)["advance_seconds"]))
        except (KeyError, TypeError):
            return _json(400, {"message": 'the body must be {"advance_seconds": NUMBER}'})
        except ValueError as refused:
            return _json(400, {"message": str(refused)})
    return _json(200, {"offset_seconds": CLOCK.offset, "ages": list(CLOCK.ages)})


def expired_records(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], bytes]:
    from moto.dynamodb.models import dynamodb_backends

    from idempotent_local import dynamodb_streams

    query = _query(full_url)
    try:
        arn, shard_id = query["stream"], query["shard"]
        after = int(query["after"]) if query.get("after") else None
    except (KeyError, ValueError):
        return _json(400, {"message": "expected ?stream=ARN&shard=ID[&after=SEQUENCE_NUMBER]"})
    found = dynamodb_streams.expired(dynamodb_backends[ACCOUNT_ID][REGION], arn, shard_id, after)
    if found is None:
        return _json(404, {"message": f"no shard {shard_id} in stream {arn}"})
    return _json(200, found)


def function_code(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], bytes]:
    from moto.awslambda.exceptions import UnknownFunctionException
    from moto.awslambda.models import lambda_backends

    arn = _query(full_url).get("function", "")
    name, _, qualifier = arn.partition(":function:")[2].partition(":")
    try:
        function = lambda_backends[ACCOUNT_ID][REGION].get_function(name, qualifier or None)
    except UnknownFunctionException:
        return _json(404, {"message": f"no function {arn!r}"})
    return 200, {"Content-Type": "application/zip"}, function.code_bytes


ROUTES = {
    "inventory": inventory,
    "clock": clock,
    "streams/clock": clock,
    "streams/expired": expired_records,
    "functions/code": function_code,
}


def install() -> None:
    """Add the routes to moto's own API (before the server serves its first request); a reset of moto
    (``POST /moto-api/reset``) also forgets how far the clock was moved."""
    from moto.moto_api._internal import urls
    from moto.moto_api._internal.models import MotoAPIBackend

    for name, handler in ROUTES.items():
        urls.url_paths["{0}" + f"{CONTROL_PATH}/{name}$"] = handler
    reset = vars(MotoAPIBackend).get("_reset_without_clock") or MotoAPIBackend.reset

    def reset_with_clock(self: Any) -> None:
        CLOCK.reset()
        reset(self)

    setattr(MotoAPIBackend, "_reset_without_clock", reset)  # noqa: B010 (once, whatever installs again)
    setattr(MotoAPIBackend, "reset", reset_with_clock)  # noqa: B010


SERVICE = Service("control API", lambda endpoint: install())

__all__ = ["ROUTES", "SERVICE", "install", "stack_notes"]
