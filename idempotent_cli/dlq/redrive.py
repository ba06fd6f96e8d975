"""Moving dead letters back to their source queue, in order, with their idempotency keys.

The walk hands over the dead letters of up to 10 groups at a time. They go in steps, each taking the next
one of up to 10 lanes (a FIFO group; in a standard DLQ, a dead letter and its copies): a SendMessageBatch
never carries two of a group, so an entry that fails never lets a later one of its group go first. Until a
dead letter was deleted, a step takes one (a role that may not delete leaves one copy in both queues, not
ten). For each dead letter of a step, in order:

1. a later copy of a dead letter this run already visited (the runtime may send one twice) follows it:
   deleted after its send, or left with it;
2. the filters choose it or leave it; ``--limit`` ends the run after that many sends;
3. :func:`letters.outgoing` builds the message to send: the producer's body, attributes, group and
   (where known) deduplication id, and ``idempotency.redrive`` so the consumer keys it as the first time,
   where it fits the source queue's size limit. A dead letter whose key cannot be restored stays, with the
   reason, unless ``--force``; one the source queue cannot take stays whatever the options;
4. the table is read for the whole step at once. A key done with another payload, which the consumer
   would quarantine again (``ON_CONFLICT=quarantine``), is skipped unless ``--force``: it stays, and its
   group goes on, as the consumer went on past it. ``--dry-run`` prints what the table says and the same
   decisions, and changes nothing; ``--force`` deletes the record of a key that is done (once per key and
   run, and only while it is the record inspected) so it is processed again, and then sends the message
   with a deduplication id never used before, so SQS cannot drop the send after the key is gone (a key
   that *is* the deduplication id sent is not deleted);
5. SendMessageBatch, each entry with the deduplication id a run sends every time: a run killed between
   send and delete leaves a copy that SQS drops when the next run sends it within 5 minutes (the consumer
   absorbs it after). SQS answers a send it drops as a duplicate with success and the id of the earlier
   message: an answer naming any id the message has had (the original, a redriven copy the runtime
   dead-lettered again, its id in the DLQ) or one of this run's sends means the send was dropped, so the
   dead letter stays, and is reported with the time its deduplication id is free again;
6. only then DeleteMessageBatch; a delete that fails ends the run (every further send would leave a copy in
   both queues).

A dead letter that stays for another reason than the filters or a skip stops its FIFO group for this run:
sending the later ones first would reorder the group.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError
from idempotent_runtime import contract

from idempotent_cli.console import Pace, Progress
from idempotent_cli.dlq.keystate import FORCED, FORGET_MEANING, MEANING, Inspection, KeyTable, State
from idempotent_cli.dlq.letters import (
    FRESH_DEDUP_PREFIX,
    RUN_FIELD,
    DeadLetter,
    Filters,
    Outgoing,
    new_run_id,
    outgoing,
    utc_text,
)
from idempotent_cli.dlq.queue import MAX_BATCH, Decision, Queue
from idempotent_cli.dlq.target import Target
from idempotent_cli.errors import DlqError

# SQS FIFO: a send whose deduplication id was accepted this recently is dropped (and answered as a success).
DEDUPLICATION_WINDOW_MS = 5 * 60 * 1000
SKIPPED = "skipped"  # what the consumer would quarantine again at once: it stays, its group goes on


@dataclass
class Tally:
    outcomes: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    forgotten: set[tuple[str, str]] = field(default_factory=set)

    @property
    def failed(self) -> int:
        """Dead letters the run meant to send that stay (any outcome but those of a run that went well)."""
        fine = ("redriven", "left by the filters", "back again", "copy deleted", "copy left")
        return sum(n for outcome, n in self.outcomes.items() if outcome not in fine)


@dataclass
class _Send:
    """A dead letter of a step on its way: what is sent for it, and what was said of its key."""

    letter: DeadLetter
    plan: Outgoing
    inspection: Inspection | None
    head: str  # how its lines name it
    new_id: str = ""  # its id in the source queue, once SQS enqueued it


@dataclass
class Redriver:
    """The visitor of one redrive; see the module docstring."""

    dry_run: ClassVar[bool] = False
    target: Target
    source: Queue
    dlq: Queue
    progress: Progress
    filters: Filters
    keys: KeyTable | None
    pace: Pace
    force: bool = False
    limit: int | None = None

    def __post_init__(self) -> None:
        self.run_id = new_run_id()
        self.source_fifo = self.source.fifo
        self.tally = Tally()
        self.known_ids: dict[str, float] = {}  # ids SendMessage returned in this run: when (epoch ms)
        self.sent = 0  # copies this run put into the source queue (what --limit counts)
        self.stopped: str | None = None  # why the run ended before the end of the DLQ
        # Each dead letter visited (by identity): its first copy's id in the DLQ, what it was sent as in the
        # source queue ("" in a dry run; None: it stays), and what its later copies become if it stays.
        self.copies: dict[str, tuple[str, str | None, Decision]] = {}
        self._inspect_warning = False
        self.sending: list[DeadLetter] = []  # sent, not yet deleted from the DLQ

    # -- the visitor ----------------------------------------------------------------------------------

    def __call__(self, letters: list[DeadLetter]) -> list[Decision | None]:
        """The decision on each of ``letters`` (None: not visited, behind its stopped group or the end of the
        run), taken a step at a time: the next dead letter of up to 10 lanes."""
        decisions: dict[str, Decision] = {}
        lanes: dict[str, deque[DeadLetter]] = {}
        for letter in letters:
            lanes.setdefault(
                letter.group_id if self.dlq.fifo and letter.group_id else letter.identity, deque()
            ).append(letter)
        waiting = deque(lanes.values())
        while waiting and self.stopped is None:
            width = MAX_BATCH if self.dry_run or self.tally.outcomes["redriven"] else 1
            step = [waiting.popleft() for _ in range(min(width, len(waiting)))]
            self._step([lane[0] for lane in step], decisions)
            for lane in step:
                decision = decisions.get(lane.popleft().message_id)
                if lane and not (self.dlq.fifo and decision is Decision.LEAVE_AND_STOP_GROUP):
                    waiting.append(lane)
        return [decisions.get(letter.message_id) for letter in letters]

    def _step(self, heads: list[DeadLetter], decisions: dict[str, Decision]) -> None:
        """Decide on each of ``heads`` in order (their keys read together), then send those that go."""
        chosen = [letter for letter in heads if self._chosen(letter)]
        plans = {letter.message_id: self._plan(letter) for letter in chosen}
        inspections = self._inspect(chosen, plans)
        sending: list[_Send] = []
        for letter in heads:
            plan, inspection = plans.get(letter.message_id), inspections.get(letter.message_id)
            decision = self._decide(letter, plan, inspection)
            if decision is None:
                assert plan is not None
                head = f"{letter.message_id} (group {plan.group_id or '-'})"
                sending.append(_Send(letter, plan, inspection, head))
                continue
            decisions[letter.message_id] = decision
            if decision is Decision.STOP:
                break
        self._send(sending, decisions)

    def _chosen(self, letter: DeadLetter) -> bool:
        """Whether ``letter`` is one the run may send (what :meth:`_decide` asks first)."""
        return (
            _run_of(letter) != self.run_id
            and letter.identity not in self.copies
            and self.filters.matches(letter, self.target.max_receive_count)
        )

    def _plan(self, letter: DeadLetter) -> Outgoing:
        return outgoing(
            letter,
            source_fifo=self.source_fifo,
            key_source=self.target.key_source,
            max_bytes=self.source.max_message_bytes,
            run_id=self.run_id,
        )

    def _decide(
        self, letter: DeadLetter, plan: Outgoing | None, inspection: Inspection | None
    ) -> Decision | None:
        """What becomes of ``letter``, short of its send (None: send it). The dry run decides the same."""
        if _run_of(letter) == self.run_id:
            # Sent by this run and back already (it failed again): not resent in the same run.
            self.tally.outcomes["back again"] += 1
            return Decision.LEAVE
        if letter.identity in self.copies:
            return self._copy(letter, *self.copies[letter.identity])
        if plan is None:
            self._count("left by the filters")
            return Decision.LEAVE
        if self.limit is not None and self.sent >= self.limit:
            self.stopped = f"stopped after --limit {self.limit}"
            return Decision.STOP
        return self._act(letter, plan, inspection, self._stays(plan, inspection))

    def _act(
        self, letter: DeadLetter, plan: Outgoing, inspection: Inspection | None, stays: tuple[str, str] | None
    ) -> Decision | None:
        """The run: a dead letter that stays is kept or skipped, --force forgets a done key; None: send it."""
        head = f"{letter.message_id} (group {plan.group_id or '-'})"
        if stays:
            return self._keep(letter, stays[0], f"{stays[0]} {head}: {stays[1]}")
        if plan.problem:
            self.progress.line(
                f"{head}: {plan.problem}; redriven anyway (--force): the consumer keys it afresh"
            )
        if self._forgets(inspection):
            kept = self._forget(letter, plan, inspection, head)
            if kept is not None:
                return kept
        self.sent += 1
        return None

    def _stays(self, plan: Outgoing, inspection: Inspection | None) -> tuple[str, str] | None:
        """Why the run leaves this dead letter in the DLQ without sending it: (outcome, reason)."""
        if plan.blocked:
            return "kept", plan.blocked
        if plan.problem and not self.force:
            return "kept", f"{plan.problem}; --force redrives it with a new key"
        if (
            not self.force
            and inspection is not None
            and inspection.state is State.CONFLICT
            and self.keys is not None
            and self.keys.config.on_conflict == contract.OnConflict.QUARANTINE
        ):
            # It would come straight back: the consumer quarantines it, and goes on with its group.
            reason = (
                f"quarantined again: key {inspection.key} is done with another payload (stored "
                f"fingerprint {inspection.stored_fingerprint}, this {inspection.fingerprint}) and the "
                "consumer quarantines such a delivery (ON_CONFLICT=quarantine); --force makes this version "
                "win"
            )
            return SKIPPED, reason
        return None

    # -- redrive --------------------------------------------------------------------------------------

    def _forget(
        self, letter: DeadLetter, plan: Outgoing, inspection: Inspection | None, head: str
    ) -> Decision | None:
        """--force: forget the key before the send; a Decision when the dead letter stays instead."""
        assert inspection is not None and inspection.key is not None and self.keys is not None
        if self._reuses_dedup_key(plan):
            # The key is the deduplication id this send reuses: SQS may drop the send (the id was used in
            # the last 5 minutes, perhaps by an earlier run's copy), and the key would be gone with nothing
            # to take its place. It stays.
            self.progress.line(
                f"{head}: key {inspection.key} was {inspection.state.value}; not forgotten: the "
                f"consumer keys it by the deduplication id this send reuses ({plan.dedup_id}), which SQS "
                "may drop as a duplicate"
            )
            return None
        if self.source_fifo:
            # Never used before, so SQS cannot drop the send once the key is gone. The key does not come
            # from it: the body, or idempotency.redrive, gives the consumer the same key.
            plan.dedup_id = f"{FRESH_DEDUP_PREFIX}{self.run_id}-{letter.message_id}"[:128]
            plan.dedup_restored = False
        if not self.keys.forget(inspection):
            return self._keep(
                letter,
                "changed since inspected",
                f"kept {head}: key {inspection.key} changed since it was inspected (it was "
                f"{inspection.state.value}): not forgotten, not redriven; run again to see its state now",
            )
        self.tally.forgotten.add((inspection.key.partition, inspection.key.sort))
        self.progress.line(
            f"{head}: key {inspection.key} was {inspection.state.value}; forgot it "
            f"({FORGET_MEANING.get(self.keys.mode, 'its record is deleted')})"
        )
        return None

    def _send(self, sending: list[_Send], decisions: dict[str, Decision]) -> None:
        """SendMessageBatch of a step, then DeleteMessageBatch of what SQS enqueued."""
        for _ in sending:
            self.pace.wait()
        self.sending = [each.letter for each in sending]
        answers = self.source.batch("send_message_batch", [each.plan.entry() for each in sending])
        enqueued = []
        for each, answer in zip(sending, answers, strict=True):
            decision = self._answered(each, answer)
            if decision is None:
                enqueued.append(each)
            else:
                decisions[each.letter.message_id] = decision
        for each, failure in zip(enqueued, self._delete([each.letter for each in enqueued]), strict=True):
            decisions[each.letter.message_id] = self._deleted(each, failure)
        self.sending = []

    def _answered(self, each: _Send, answer: dict[str, Any]) -> Decision | None:
        """A dead letter whose send failed or was dropped by SQS stays (the decision); None: enqueued."""
        letter, plan, head = each.letter, each.plan, each.head
        if "Failed" in answer:
            return self._keep(
                letter, "send failed", f"kept {head}: the send to the source queue failed: {answer['Failed']}"
            )
        dropped_as = _dropped_as(letter, answer, self.known_ids) if self.source_fifo else None
        if dropped_as is not None:
            return self._keep(
                letter,
                "dropped by SQS",
                f"kept {head}: SQS accepted the send but dropped it as a duplicate of message {dropped_as} "
                f"(deduplication id {plan.dedup_id} was used within the last 5 minutes); redrive it again "
                f"after {_free_after(self.known_ids.get(dropped_as) or letter.sent_ms)}",
            )
        each.new_id = answer["MessageId"]
        self.known_ids[each.new_id] = time.time() * 1000
        return None

    def _deleted(self, each: _Send, failure: str | None) -> Decision:
        """After the send: the dead letter deleted (``failure``: why not, which ends the run)."""
        letter, plan, head, new_id = each.letter, each.plan, each.head, each.new_id
        if failure is not None:
            return self._refused(
                failure,
                "not deleted",
                f"{head} was sent as {new_id} but the dead letter could not be deleted ({failure}): it is "
                "still in the DLQ; redriving it again is a duplicate the pipeline absorbs",
            )
        self.copies[letter.identity] = (letter.message_id, new_id, Decision.DELETED)
        dedup = ""
        if self.source_fifo:
            dedup = (
                ", deduplication id restored"
                if plan.dedup_restored
                else f", deduplication id {plan.dedup_id}"
            )
        state = f"; key was {each.inspection.state.value}" if each.inspection is not None else ""
        notes = [f"    note: {note}" for note in plan.notes]
        self._count("redriven", f"redriven {head} as {new_id}{dedup}{state}", *notes)
        return Decision.DELETED

    def _delete(self, letters: list[DeadLetter]) -> list[str | None]:
        """DeleteMessageBatch: per dead letter None, or why it could not be deleted."""
        entries = [{"ReceiptHandle": letter.receipt_handle} for letter in letters]
        return [answer.get("Failed") for answer in self.dlq.batch("delete_message_batch", entries)]

    def _reuses_dedup_key(self, plan: Outgoing) -> bool:
        """Whether the consumer keys ``plan`` by the MessageDeduplicationId it is sent with (see _forget): a
        FIFO source queue, KEY_SOURCE=dedup_id (or unknown) and no original deduplication id in
        ``idempotency.redrive`` (which the runtime reads first)."""
        if not self.source_fifo or self.target.key_source not in (None, contract.KeySource.DEDUP_ID):
            return False
        return not (plan.redrive and plan.redrive.get("dedup_id"))

    def _forgets(self, inspection: Inspection | None) -> bool:
        """Whether --force deletes this key's record before the send (once per key and run)."""
        if not self.force or inspection is None or inspection.key is None:
            return False
        if inspection.state not in FORCED:
            return False
        return (inspection.key.partition, inspection.key.sort) not in self.tally.forgotten

    def _copy(self, letter: DeadLetter, first: str, sent_as: str | None, stays: Decision) -> Decision:
        """A later copy of a dead letter this run visited: it stays with it, or is deleted after its send."""
        head = f"{letter.message_id} (group {letter.original_group_id or '-'})"
        if sent_as is None:
            self._count("copy left", f"kept {head}: a copy of {first}, which stays")
            return stays
        failure = None if self.dry_run else self._delete([letter])[0]
        if failure is not None:
            line = f"{head}, a copy of {first}, could not be deleted ({failure})"
            return self._refused(failure, "copy not deleted", line)
        done = f"deleted after its send as {sent_as}" if sent_as else "deleted after its send"
        self._count("copy deleted", f"{head}: a copy of {first}: {done}")
        return Decision.LEAVE if self.dry_run else Decision.DELETED

    def _refused(self, failure: str, outcome: str, line: str) -> Decision:
        """A delete the DLQ refused: counted as ``outcome``, said in ``line``, and the end of the run."""
        self._count(outcome, line)
        # botocore has retried what may pass: every further send would leave a copy in both queues too.
        self.stopped = (
            f"stopped: the DLQ refused DeleteMessage ({failure}): every further send would leave a copy in "
            "both queues"
        )
        return Decision.STOP

    def _keep(self, letter: DeadLetter, outcome: str, line: str) -> Decision:
        decision = _stays_decision(outcome)
        self.copies.setdefault(letter.identity, (letter.message_id, None, decision))
        self._count(outcome, line)
        return decision

    def _count(self, outcome: str, *lines: str) -> None:
        """Count ``outcome``, say ``lines``, and step the progress bar."""
        self.tally.outcomes[outcome] += 1
        for line in lines:
            self.progress.line(line)
        self.progress.step(outcome)

    def _inspect(self, letters: list[DeadLetter], plans: dict[str, Outgoing]) -> dict[str, Inspection | None]:
        """What the table says about each key, by message id (none: the table is not known or not read)."""
        if self.keys is None or self._inspect_warning or not letters:
            return {}
        try:
            found = self.keys.inspect_all(
                [(plans[letter.message_id], letter.message_id) for letter in letters]
            )
        except (ClientError, BotoCoreError) as exc:
            if self.dry_run or self.force:
                raise DlqError(f"cannot read the idempotency table {self.keys.table_name}: {exc}") from None
            self._inspect_warning = True
            self.progress.line(
                f"warning: cannot read the idempotency table ({exc}); key states are not shown"
            )
            return {}
        return {letter.message_id: each for letter, each in zip(letters, found, strict=True)}


class Preview(Redriver):
    """``--dry-run``: the run's decisions, each printed with what the table says, instead of carried out."""

    dry_run = True

    def _act(
        self, letter: DeadLetter, plan: Outgoing, inspection: Inspection | None, stays: tuple[str, str] | None
    ) -> Decision:
        """What the run would do with this dead letter, as far as it can be known without sending."""
        self.tally.states[inspection.state.value if inspection else "unknown"] += 1
        line = f"{letter.message_id} group {plan.group_id or '-'}{_state_text(inspection)}"
        decision = _stays_decision(stays[0]) if stays else Decision.LEAVE
        self.copies[letter.identity] = (letter.message_id, None if stays else "", decision)
        if stays:
            self.tally.outcomes[stays[0]] += 1
            line += f"; {stays[0]}: {stays[1]}"
        else:
            self.sent += 1
            if plan.problem:
                line += f"; redriven anyway (--force), under a new key: {plan.problem}"
            if self._forgets(inspection):
                assert inspection is not None and inspection.key is not None
                if self._reuses_dedup_key(plan):
                    line += "; its key is not forgotten: the consumer keys it by the deduplication id sent"
                else:
                    self.tally.forgotten.add((inspection.key.partition, inspection.key.sort))
                    line += "; --force forgets its key first"
        self.progress.line(line)
        for note in plan.notes:
            self.progress.line(f"    note: {note}")
        self.progress.step("checked")
        return decision


def _state_text(inspection: Inspection | None) -> str:
    """What the table says about a dead letter's key, for its dry-run line."""
    if inspection is None:
        return ": key state unknown (the consumer is unknown: name it with --stack or --function)"
    key = f" key {inspection.key}" if inspection.key else ""
    text = f"{key}: {MEANING[inspection.state]}"
    if inspection.state is State.CONFLICT:
        text += f" [stored fingerprint {inspection.stored_fingerprint}, this {inspection.fingerprint}]"
    if inspection.state is State.INVALID and inspection.reason:
        text += f" [{inspection.reason}]"
    return text


def _dropped_as(letter: DeadLetter, answer: dict[str, Any], sent: dict[str, float]) -> str | None:
    """The id of the message SQS deduplicated a send to a FIFO queue against (any id ``letter`` has had, or
    one of ``sent``, this run's sends), or None if it was enqueued."""
    new_id = answer.get("MessageId", "")
    return new_id if new_id in {*letter.message_ids, *sent} else None


def _free_after(sent_ms: float) -> str:
    """When the deduplication id a send was dropped for is free again: 5 minutes after the message it
    duplicated was sent (a send of this run, or one sent before the dead letter reached the DLQ)."""
    now_ms = time.time() * 1000
    free_ms = sent_ms + DEDUPLICATION_WINDOW_MS if sent_ms else 0
    if free_ms <= now_ms:
        free_ms = now_ms + DEDUPLICATION_WINDOW_MS
    return utc_text(math.ceil(free_ms / 1000))


def _stays_decision(outcome: str) -> Decision:
    """A skipped dead letter's group goes on (the consumer went on past it); any other that stays stops it."""
    return Decision.LEAVE if outcome == SKIPPED else Decision.LEAVE_AND_STOP_GROUP


def _run_of(letter: DeadLetter) -> str | None:
    earlier = letter.earlier_redrive
    value = earlier.get(RUN_FIELD) if earlier else None
    return value if isinstance(value, str) else None
