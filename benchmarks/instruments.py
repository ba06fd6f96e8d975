"""Instruments attached to one botocore client: request counting, standing stubbed answers after a fixed
latency.

Both work through botocore's event system on the client they are attached to, so the code under test (our
runtime or Powertools) runs unchanged and only that client is affected.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.stub import StubAssertionError, Stubber


class RequestCounter:
    """Counts the HTTP requests a client sends, per operation (retries included: each attempt is a request).

    Registered first on `before-send`, so it sees every attempt before moto (or the network) answers it.
    """

    def __init__(self, client: Any, service: str = "dynamodb") -> None:
        self._client = client
        self._event = f"before-send.{service}"
        self._lock = threading.Lock()
        self.by_operation: Counter[str] = Counter()
        client.meta.events.register_first(self._event, self._on_send, unique_id=f"bench-counter-{id(self)}")

    def _on_send(self, event_name: str = "", **_: Any) -> None:
        with self._lock:
            self.by_operation[event_name.rsplit(".", 1)[-1]] += 1  # before-send.dynamodb.PutItem

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.by_operation.values())

    def reset(self) -> None:
        with self._lock:
            self.by_operation.clear()

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.by_operation)

    def detach(self) -> None:
        self._client.meta.events.unregister(self._event, unique_id=f"bench-counter-{id(self)}")


class StandingStubber(Stubber):
    """A botocore Stubber that answers every call of an operation with the same response, in any order,
    after ``delay_s`` (DynamoDB's round trip: a sleep releases the GIL as a socket wait does).

    The stock Stubber pops a queue of responses in call order, which concurrent threads (our runtime runs
    message groups in parallel) cannot honour. This one keeps one validated response per operation and
    answers any number of calls; a call to an operation without a response is an error, as in Stubber.
    No network, no moto: the request is built and validated by botocore, then answered in `before-call`.
    """

    def __init__(
        self,
        client: Any,
        responses: Mapping[str, Mapping[str, Any]],
        delay_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s!r}")
        super().__init__(client)
        self.delay_s = delay_s
        self._sleep = sleep
        self._standing: dict[str, dict[str, Any]] = {}
        for method, response in responses.items():
            operation_name = client.meta.method_to_api_mapping.get(method)
            if operation_name is None:
                raise ValueError(f"unknown client method for stubbing: {method!r}")
            self._validate_operation_response(operation_name, dict(response))
            self._standing[operation_name] = dict(response)
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _assert_expected_call_order(self, model: Any, params: Any) -> None:
        if model.name not in self._standing:
            raise StubAssertionError(
                operation_name=model.name,
                reason=f"no standing response for {model.name}; stubbed: {sorted(self._standing)}",
            )

    def _assert_expected_params(self, model: Any, params: Any, context: Any, **kwargs: Any) -> None:
        if self._should_not_stub(context):
            return
        self._assert_expected_call_order(model, params)

    def _get_response_handler(self, model: Any, params: Any, context: Any, **kwargs: Any) -> Any:
        self._assert_expected_call_order(model, params)
        with self._lock:
            self.calls[model.name] += 1
        if self.delay_s:
            self._sleep(self.delay_s)
        http_response = AWSResponse(None, 200, {}, None)
        return http_response, dict(self._standing[model.name])


class ContendedStubber(StandingStubber):
    """A :class:`StandingStubber` that refuses writes the way DynamoDB does when transactions contend: while
    a ``TransactWriteItems`` is in flight (for its whole round trip) it holds its items, and another
    transaction touching one of them is cancelled (``TransactionCanceledException``, reason
    ``TransactionConflict`` at that entry) and a ``PutItem`` / ``UpdateItem`` / ``DeleteItem`` on one is
    refused (``TransactionConflictException``), each after the round trip. Items are named by their table
    and ``key_names`` (the table's partition and sort key). ``conflicts`` counts the refusals."""

    SINGLE_WRITES = ("PutItem", "UpdateItem", "DeleteItem")

    def __init__(
        self,
        client: Any,
        responses: Mapping[str, Mapping[str, Any]],
        delay_s: float,
        key_names: tuple[str, str] = ("pk", "sk"),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(client, responses, delay_s, sleep)
        self.key_names = key_names
        self.conflicts = 0
        self._writing: Counter[tuple[str, ...]] = Counter()  # items of the transactions in flight

    def _items(self, operation: str, request: Mapping[str, Any]) -> list[tuple[str, ...]]:
        """The items a write names, from the request botocore built and validated (DynamoDB's JSON body)."""
        if operation not in ("TransactWriteItems", *self.SINGLE_WRITES):
            return []
        params = json.loads(request["body"])
        if operation == "TransactWriteItems":
            bodies = [next(iter(entry.values())) for entry in params["TransactItems"]]
        else:
            bodies = [params]
        found = []
        for body in bodies:
            item = body.get("Item") or body.get("Key") or {}
            found.append((body["TableName"], *(repr(item.get(name)) for name in self.key_names)))
        return found

    def _get_response_handler(self, model: Any, params: Any, context: Any, **kwargs: Any) -> Any:
        items = self._items(model.name, params)
        transaction = model.name == "TransactWriteItems"
        with self._lock:
            clashing = [index for index, item in enumerate(items) if self._writing[item]]
            if clashing:
                self.conflicts += 1
            elif transaction:
                self._writing.update(set(items))
        if clashing:
            if self.delay_s:
                self._sleep(self.delay_s)
            return self._conflict(model.name, len(items), clashing)
        try:
            return super()._get_response_handler(model, params, context, **kwargs)
        finally:
            if transaction:
                with self._lock:
                    self._writing.subtract(set(items))
                    self._writing += Counter()  # drop the items no transaction holds any more

    @staticmethod
    def _conflict(operation: str, entries: int, clashing: list[int]) -> tuple[AWSResponse, dict[str, Any]]:
        metadata = {"HTTPStatusCode": 400, "RequestId": "contended"}
        if operation != "TransactWriteItems":
            error = {"Code": "TransactionConflictException", "Message": "Transaction is ongoing for the item"}
            return AWSResponse(None, 400, {}, None), {"Error": error, "ResponseMetadata": metadata}
        reasons = [
            {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
            if index in clashing
            else {"Code": "None"}
            for index in range(entries)
        ]
        codes = ", ".join(reason["Code"] for reason in reasons)
        message = f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]"
        parsed = {
            "Error": {"Code": "TransactionCanceledException", "Message": message},
            "CancellationReasons": reasons,
            "ResponseMetadata": metadata,
        }
        return AWSResponse(None, 400, {}, None), parsed


class FakeLambdaContext:
    """The parts of Lambda's context object the handlers read."""

    function_name = "bench-consumer"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench-consumer"
    memory_limit_in_mb = 512
    aws_request_id = "00000000-0000-4000-8000-000000000000"
    log_group_name = "/aws/lambda/bench-consumer"
    log_stream_name = "bench"

    def __init__(self, remaining_ms: int = 60_000) -> None:
        self._deadline = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))
