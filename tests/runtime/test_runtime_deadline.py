"""Bounded by the invocation: DynamoDB calls never outlive it, so a hung DynamoDB gives a clean partial
batch response instead of a whole-batch timeout (which would redeliver every record)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.flow import build_handler
from runtime_helpers import event, failures, inject_errors, record


class LambdaContext:
    """The part of Lambda's context the runtime reads, on the real clock."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)


@pytest.fixture
def silent_server():
    """A TCP server on loopback that accepts connections and never answers."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            accepted.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", accepted
    stop.set()
    thread.join(5)
    for connection in accepted:
        connection.close()
    server.close()


@pytest.mark.slow
def test_a_dynamodb_that_never_answers_gives_a_partial_response_before_the_deadline(
    silent_server, monkeypatch, table
):
    url, accepted = silent_server
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", url)  # the runtime's own client, created on first use
    handler = build_handler(Config(table_name=table))
    batch = [record({"x": f"o{i}", "y": "1"}, group=f"g{i % 2}") for i in range(4)]
    context = LambdaContext(3.0)
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("response", handler(event(*batch), context)))
    thread.start()
    thread.join(3.0 + 5)  # on main: botocore's 10 s read timeout, three attempts
    assert "response" in box, "the handler did not return within its invocation"
    assert context.get_remaining_time_in_millis() > 0  # returned before the context's deadline
    assert sorted(failures(box["response"])) == sorted(r["messageId"] for r in batch)
    assert accepted  # the requests did reach the server


class FakeTime:
    """A context and a sleep on one fake clock: the runtime's waits move the invocation toward its end."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds
        self.attempts: list[float] = []

    def get_remaining_time_in_millis(self) -> int:
        return int(self.left * 1000)

    def sleep(self, seconds: float) -> None:
        self.left -= seconds


def test_retries_start_only_while_the_invocation_has_time_for_them(make_handler, fresh_dynamodb):
    fake = FakeTime(1.6)

    def slow_attempt(**_):  # each throttled answer takes 0.2 s
        fake.attempts.append(fake.left)
        fake.left -= 0.2

    fresh_dynamodb.meta.events.register("before-call.dynamodb.PutItem", slow_attempt)
    inject_errors(fresh_dynamodb, "PutItem", "ThrottlingException")
    handler, _ = make_handler(client=fresh_dynamodb, sleep=fake.sleep)
    (result,) = handler.process_batch(event(record({"x": "a", "y": "1"})), fake)
    assert result.outcome == "failed" and "ThrottlingException" in result.reason
    # 0.5 s are kept to answer; no attempt starts with less than 0.25 s left for it.
    assert fake.attempts and all(left - 0.5 >= 0.25 for left in fake.attempts)
    assert fake.left > 0  # the invocation ended with time to answer


def test_the_runtimes_client_leaves_retries_to_the_runtime_and_follows_the_deadline():
    from idempotent_runtime import deadline
    from idempotent_runtime.clients import create_client

    client = create_client("dynamodb")
    assert client.meta.config.retries["total_max_attempts"] == 1
    timeout = client._endpoint.http_session._timeout
    assert (timeout.clone().connect_timeout, timeout.clone().read_timeout) == (3, 10)  # no deadline: static
    previous = deadline.bind(LambdaContext(2.0))
    try:
        shortened = timeout.clone()
    finally:
        deadline.restore(previous)
    assert 1.0 < shortened.read_timeout <= 1.5 and 1.0 < shortened.connect_timeout <= 1.5


def test_without_botocores_internals_the_client_keeps_static_timeouts():
    from idempotent_runtime.deadline import install_deadline_timeouts

    class Unusual:
        """A client whose HTTP session is not botocore's urllib3 one."""

    assert install_deadline_timeouts(Unusual()) is False
