"""Reading a dead-letter queue without losing or reordering anything.

SQS has no "peek": a message is read by receiving it, which hides it (its visibility timeout) until it is
deleted or made visible again. A FIFO queue hands out no further message of a group while an earlier one of
that group is hidden. So the walk:

- receives in batches with a visibility timeout long enough for the work on one batch, and keeps every
  message it holds hidden (extending the timeout) until the walk ends;
- gives each message, in the order the queue hands them out (within a FIFO group: the group's order), to
  a visitor that deletes it (after moving it elsewhere) or leaves it; a visitor of batches gets what the
  receives brought until they span 10 groups (a FIFO queue hands out one group at a time), so that it can
  send and delete 10 at a time;
- when a receive comes back empty while the queue still has visible messages, which in a FIFO queue are
  behind messages it holds, it makes what it holds visible again and receives once more: the queue then
  hands out the held ones first (known, held again) and the ones behind them;
- keeps every long poll shorter than what is left of its hold (a hold under 3 seconds reads with short
  polls), so that what it holds stays hidden while it polls; and should a hold still run out (a slow
  visitor), a receive that hands back only messages it has seen ends the round: each round ends, and each
  message is visited once;
- stops when a round brings nothing new, and counts what it could not reach: messages in flight elsewhere
  (another reader, or an earlier run whose visibility timeout has not ended), and messages of a FIFO group
  behind 10 held ones (SQS hands out at most 10 of a group at a time: which groups it held 10 of), or, in
  a standard queue, counted visible but not returned by any receive;
- makes everything it still holds visible again when it ends, also on an error or Ctrl-C.

It never deletes a message the visitor did not ask to delete.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, cast

from botocore.exceptions import BotoCoreError, ClientError
from idempotent_runtime import contract

from idempotent_cli.dlq.letters import DeadLetter, Which, message_size

MAX_BATCH = 10  # SQS: ReceiveMessage and every *Batch request
BATCH_BYTES = contract.SQS_MAX_MESSAGE_BYTES  # SQS: SendMessageBatch, its messages in all
DEFAULT_VISIBILITY_SECONDS = 120
DEFAULT_WAIT_SECONDS = 1  # long polling asks every SQS server: an empty answer then means empty
EMPTY_RETRIES = 2  # empty receives while the counts say messages are visible (approximate counts lag)
# Seconds to wait, one count a second, for ApproximateNumberOfMessagesNotVisible to stop counting messages
# the walk deleted, before calling the rest in flight elsewhere.
SETTLE_SECONDS = 5


class Decision(Enum):
    LEAVE = "leave"  # stays in the queue, in its place
    LEAVE_AND_STOP_GROUP = "stop-group"  # stays, and later messages of its FIFO group are not visited
    DELETED = "deleted"  # the visitor deleted it
    STOP = "stop"  # stays; the walk ends here (nothing more is received)


# The queue attributes of Counts' fields, in their order.
COUNTS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


@dataclass(frozen=True)
class Counts:
    visible: int
    in_flight: int
    delayed: int

    @property
    def total(self) -> int:
        return self.visible + self.in_flight + self.delayed


class Queue:
    """One SQS queue, as the tool uses it."""

    def __init__(
        self,
        sqs: Any,
        url: str,
        *,
        visibility_seconds: int = DEFAULT_VISIBILITY_SECONDS,
        wait_seconds: int = DEFAULT_WAIT_SECONDS,
    ) -> None:
        self.sqs, self.url = sqs, url
        self.visibility_seconds, self.wait_seconds = visibility_seconds, wait_seconds
        self._attributes: dict[str, str] | None = None

    @property
    def attributes(self) -> dict[str, str]:
        if self._attributes is None:
            self._attributes = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["All"])[
                "Attributes"
            ]
        return self._attributes

    @property
    def fifo(self) -> bool:
        return self.attributes.get("FifoQueue") == "true" or self.url.endswith(".fifo")

    @property
    def max_message_bytes(self) -> int:
        """The largest message the queue takes (body and attributes)."""
        return int(self.attributes.get("MaximumMessageSize") or contract.SQS_MESSAGE_BYTES)

    @property
    def arn(self) -> str:
        return self.attributes["QueueArn"]

    def counts(self) -> Counts:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=list(COUNTS))[
            "Attributes"
        ]
        return Counts(*(int(attributes.get(name, 0)) for name in COUNTS))

    def receive(self, *, wait_seconds: int | None = None) -> list[dict[str, Any]]:
        """Up to 10 messages, held for ``visibility_seconds``; a long poll of ``wait_seconds`` (default: the
        queue's)."""
        return self.sqs.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=MAX_BATCH,
            VisibilityTimeout=self.visibility_seconds,
            WaitTimeSeconds=self.wait_seconds if wait_seconds is None else wait_seconds,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])

    def change_visibility(self, handles: list[str], seconds: int) -> list[str]:
        """Set the visibility timeout of received messages; returns the errors (messages gone meanwhile)."""
        entries = [{"ReceiptHandle": handle, "VisibilityTimeout": seconds} for handle in handles]
        return [
            answer["Failed"]
            for answer in self.batch("change_message_visibility_batch", entries)
            if "Failed" in answer
        ]

    def delete(self, letter: DeadLetter) -> None:
        self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=letter.receipt_handle)

    def batch(self, operation: str, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``operation`` (``send_message_batch``, ``delete_message_batch``...) for ``entries``, in order, in
        requests SQS takes: per entry its answer (``MessageId`` for a send), or ``{"Failed": why}`` (each
        entry of a request refused as a whole too: botocore has retried what may pass)."""
        answers: list[dict[str, Any]] = []
        for request in _requests(entries):
            try:
                response = getattr(self.sqs, operation)(
                    QueueUrl=self.url, Entries=[{"Id": str(n), **entry} for n, entry in enumerate(request)]
                )
            except (ClientError, BotoCoreError) as exc:
                answers += [{"Failed": str(exc)}] * len(request)
                continue
            done = {entry["Id"]: entry for entry in response.get("Successful", [])}
            done.update(
                (entry["Id"], {"Failed": f"{entry.get('Code')}: {entry.get('Message')}"})
                for entry in response.get("Failed", [])
            )
            answers += [
                done.get(str(n), {"Failed": "SQS did not answer for it"}) for n in range(len(request))
            ]
        return answers


@dataclass
class Walk:
    """What a walk saw: every message it visited, and what it could not reach."""

    fifo: bool
    hold_seconds: int  # how long the walk hid what it received, at a time
    visited: int = 0
    deleted: int = 0
    left: dict[str, DeadLetter] = field(default_factory=dict)  # still in the queue, by message id
    stopped_groups: dict[str, str] = field(default_factory=dict)  # group -> message id that stopped it
    behind_stopped: int = 0  # later messages of stopped groups, left in place unvisited
    not_reached: int = 0  # visible but not handed out (FIFO: behind 10 held messages of their group)
    full_groups: list[str] = field(default_factory=list)  # FIFO groups the walk ended holding 10 of
    in_flight_elsewhere: int = 0  # hidden by another reader when the walk ended
    release_errors: list[str] = field(default_factory=list)
    ended_early: bool = False


Visit = Callable[[DeadLetter], Decision]
# A visitor of batches: a decision per dead letter, in order; None for one it did not visit (behind a group
# its visit stopped, or after it ended the walk).
VisitBatch = Callable[[list[DeadLetter]], list[Decision | None]]


def walk(
    queue: Queue,
    which: Which,
    visit: Visit | VisitBatch,
    *,
    batches: bool = False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Walk:
    """Visit every message of ``queue`` once, in the queue's order (see the module docstring): one at a time,
    or, with ``batches``, what the receives brought until they span 10 groups."""
    return _Walker(queue, which, visit, batches, clock, sleep).run()


@dataclass
class _Walker:
    queue: Queue
    which: Which
    visit: Visit | VisitBatch
    batches: bool
    clock: Callable[[], float]
    sleep: Callable[[float], None]

    def __post_init__(self) -> None:
        self.result = Walk(fifo=self.queue.fifo, hold_seconds=self.queue.visibility_seconds)
        self.held: dict[str, DeadLetter] = {}  # received, not deleted: hidden by us until the end
        self.seen: set[str] = set()
        self.stopped = False
        self.refreshed = self.clock()  # when the oldest message we hold was last given a full timeout

    def run(self) -> Walk:
        try:
            self._receive_all()
            retries = EMPTY_RETRIES
            while not self.stopped:
                counts = self.queue.counts()
                if counts.visible == 0:
                    break
                # Visible messages we have not been handed: in a FIFO queue, behind the heads of groups
                # we hold. Let one group at a time be handed out again, the others staying hidden, so the
                # queue can only answer with that group: its held head again, then the ones behind it.
                progressed = False
                if self.queue.fifo:
                    for group in self._held_groups():
                        if self.stopped:
                            break
                        self._release([m for m in self.held.values() if m.group_id == group])
                        progressed = self._receive_all() or progressed
                if not progressed:
                    if retries == 0:
                        break
                    retries -= 1  # approximate counts lag behind, and a short poll can miss a message
                    self._receive_all()
            counts = self._settled_counts()
            self.result.not_reached = counts.visible if not self.result.ended_early else 0
            self.result.in_flight_elsewhere = max(0, counts.in_flight - len(self.held))
            held = Counter(letter.group_id for letter in self.held.values() if self.queue.fifo)
            self.result.full_groups = [str(group) for group, n in held.items() if n >= MAX_BATCH]
        finally:
            self._release(list(self.held.values()))
        return self.result

    def _settled_counts(self) -> Counts:
        """The queue's counts once they no longer count, as in flight, messages this walk deleted (they lag
        behind deletes; a message another reader holds stays in flight)."""
        counts = self.queue.counts()
        for _ in range(SETTLE_SECONDS if self.result.deleted else 0):
            if counts.in_flight <= len(self.held):
                break
            self.sleep(1)
            counts = self.queue.counts()
        return counts

    def _held_groups(self) -> list[str]:
        groups: dict[str, None] = {}
        for letter in self.held.values():
            if letter.group_id is not None and letter.group_id not in self.result.stopped_groups:
                groups.setdefault(letter.group_id)
        return list(groups)

    def _receive_all(self) -> bool:
        """Receive until the queue answers with nothing new (nothing, or only messages seen before, whose hold
        ran out); returns whether a message not seen before came. Each receive that goes on brings a message
        not seen before: the loop ends."""
        pending: list[DeadLetter] = []  # received, not seen before, not visited yet
        came, new = True, False
        while came and not self.stopped:
            self._keep_hidden()
            messages = self.queue.receive(wait_seconds=self._poll_seconds())
            letters = [DeadLetter.from_message(message, self.which) for message in messages]
            for letter in letters:
                # Held from the moment it is received (the newest receipt handle is the one that counts),
                # so an error while visiting an earlier one still makes it visible again.
                self.held[letter.message_id] = letter
            fresh = [letter for letter in letters if letter.message_id not in self.seen]
            self.seen.update(letter.message_id for letter in fresh)
            pending += fresh
            came = bool(fresh)
            new = new or came
            if pending and (not came or not self.batches or len(_lanes(pending)) >= MAX_BATCH):
                self._visit(pending)
                pending = []
        return new

    def _visit(self, letters: list[DeadLetter]) -> None:
        if not self.batches:
            for letter in letters:
                if not self.stopped and not self._behind(letter):
                    self._record(letter, cast(Visit, self.visit)(letter))
            return
        live = [letter for letter in letters if not self._behind(letter)]
        decisions = cast(VisitBatch, self.visit)(live) if live else []
        for letter, decision in zip(live, decisions, strict=True):
            if decision is None:
                self._behind(letter)  # a later one of a group its visit stopped (else: after the end)
            else:
                self._record(letter, decision)

    def _behind(self, letter: DeadLetter) -> bool:
        """Whether ``letter`` is behind a FIFO group this walk stopped (then left in place, unvisited)."""
        if not (self.queue.fifo and letter.group_id in self.result.stopped_groups):
            return False
        self.result.behind_stopped += 1
        self.result.left[letter.message_id] = letter
        return True

    def _record(self, letter: DeadLetter, decision: Decision) -> None:
        result = self.result
        result.visited += 1
        if decision is Decision.DELETED:
            result.deleted += 1
            del self.held[letter.message_id]
            return
        result.left[letter.message_id] = letter
        if decision is Decision.LEAVE_AND_STOP_GROUP and letter.group_id is not None:
            result.stopped_groups.setdefault(letter.group_id, letter.message_id)
        elif decision is Decision.STOP:
            self.stopped = result.ended_early = True

    def _poll_seconds(self) -> int:
        """The long poll of the next receive: the queue's, but while the walk holds messages never more than
        what is left of their hold once :meth:`_keep_hidden` has run (at least half of it, less a second
        for the round trip); a short poll (0) for a hold under 3 seconds."""
        if not self.held:
            return self.queue.wait_seconds
        return max(0, min(self.queue.wait_seconds, (self.queue.visibility_seconds - 1) // 2))

    def _keep_hidden(self) -> None:
        if not self.held:
            self.refreshed = self.clock()
        elif self.clock() - self.refreshed > self.queue.visibility_seconds / 2:
            handles = [letter.receipt_handle for letter in self.held.values()]
            self.result.release_errors += self.queue.change_visibility(handles, self.queue.visibility_seconds)
            self.refreshed = self.clock()

    def _release(self, letters: list[DeadLetter]) -> None:
        """Make held messages visible again, in place; failures are kept for the report."""
        if not letters:
            return
        for letter in letters:
            self.held.pop(letter.message_id, None)
        # Those that fail become visible anyway when their visibility timeout ends; nothing is lost.
        self.result.release_errors += self.queue.change_visibility([m.receipt_handle for m in letters], 0)


def _lanes(letters: list[DeadLetter]) -> set[str]:
    """The groups ``letters`` span (a message without one is its own)."""
    return {letter.group_id or letter.message_id for letter in letters}


def _requests(entries: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """``entries`` as batch requests: at most 10 entries, and messages of at most BATCH_BYTES in all."""
    request: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        entry_size = message_size(entry.get("MessageBody", ""), entry.get("MessageAttributes", {}))
        if request and (len(request) == MAX_BATCH or size + entry_size > BATCH_BYTES):
            yield request
            request, size = [], 0
        request.append(entry)
        size += entry_size
    if request:
        yield request
