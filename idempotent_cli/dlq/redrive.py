"""Moving dead letters back to their source queue, in order, with their idempotency keys.

For each dead letter the walk hands over (within a FIFO group, in the group's order):

1. a later copy of a dead letter this run already visited (the runtime may send one twice) follows it:
   deleted after its send, or left with it;
2. the filters choose it or leave it; ``--limit`` ends the run after that many sends;
3. :func:`letters.outgoing` builds the message to send: the producer's body, attributes, group and
   (where known) deduplication id, and ``idempotency.redrive`` so the consumer keys it as the first time,
   where it fits the source queue's size limit. A dead letter whose key cannot be restored stays, with the
   reason, unless ``--force``; one the source queue cannot take stays whatever the options;
4. ``--dry-run`` prints what the table says about its key and what the run would do, and changes nothing;
   ``--force`` deletes the record of a key that is done (once per key and run, and only while it is the
   record inspected) so it is processed again, and then sends the message with a deduplication id never
   used before, so SQS cannot drop the send after the key is gone (a key that *is* the deduplication id
   sent is not deleted);
5. SendMessage. SQS answers a send it drops as a duplicate (same deduplication id within 5 minutes of an
   accepted one, even one deleted since) with success and the id of the earlier message: an answer naming
   any id the message has had (the original, a redriven copy the runtime dead-lettered again, its id in
   the DLQ) or one of this run's sends means the send was dropped, so the dead letter stays, and is
   reported with the time its deduplication id is free again;
6. only then is the dead letter deleted; a delete that fails ends the run (every further send would leave
   a copy in both queues).

A dead letter that stays for a reason other than the filters stops its FIFO group for this run: sending the
later ones first would reorder the group.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from idempotent_runtime import contract

from idempotent_cli.dlq.console import Console, Pace, Progress
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
from idempotent_cli.dlq.queue import Decision, Queue
from idempotent_cli.dlq.target import Target
from idempotent_cli.errors import DlqError

# SQS FIFO: a send whose deduplication id was accepted this recently is dropped (and answered as a success).
DEDUPLICATION_WINDOW_MS = 5 * 60 * 1000


@dataclass
class Tally:
    outcomes: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    forgotten: set[tuple[str, str]] = field(default_factory=set)

    @property
    def failed(self) -> int:
        return sum(
            self.outcomes[name]
            for name in (
                "kept",
                "changed since inspected",
                "send failed",
                "dropped by SQS",
                "not deleted",
                "copy not deleted",
            )
        )


class Redriver:
    """The visitor of one redrive (or dry run); see the module docstring."""

    def __init__(
        self,
        target: Target,
        source: Queue,
        dlq: Queue,
        *,
        console: Console,
        progress: Progress,
        filters: Filters,
        keys: KeyTable | None,
        dry_run: bool = False,
        force: bool = False,
        limit: int | None = None,
        pace: Pace | None = None,
    ) -> None:
        self.target, self.source, self.dlq = target, source, dlq
        self.console, self.progress, self.filters, self.keys = console, progress, filters, keys
        self.dry_run, self.force, self.limit = dry_run, force, limit
        self.pace = pace or Pace(None, console)
        self.run_id = new_run_id()
        self.source_fifo = source.fifo
        self.tally = Tally()
        self.known_ids: dict[str, float] = {}  # ids SendMessage returned in this run: when (epoch ms)
        self.sent = 0  # copies this run put into the source queue (what --limit counts)
        self.stopped: str | None = None  # why the run ended before the end of the DLQ
        # Each dead letter visited (by identity): its first copy's id in the DLQ, and what it was sent as in
        # the source queue ("" in a dry run; None: it stays). Its later copies follow it.
        self.copies: dict[str, tuple[str, str | None]] = {}
        self._inspect_warning = False
        self.sending: DeadLetter | None = None  # sent, not yet deleted from the DLQ

    # -- the visitor ----------------------------------------------------------------------------------

    def __call__(self, letter: DeadLetter) -> Decision:
        if _run_of(letter) == self.run_id:
            # Sent by this run and back already (it failed again): not resent in the same run.
            self.tally.outcomes["back again"] += 1
            return Decision.LEAVE
        if letter.identity in self.copies:
            return self._copy(letter, *self.copies[letter.identity])
        if not self.filters.matches(letter, self.target.max_receive_count):
            self.tally.outcomes["left by the filters"] += 1
            self.progress.step("left by the filters")
            return Decision.LEAVE
        if self.limit is not None and self.sent >= self.limit:
            self.stopped = f"stopped after --limit {self.limit}"
            return Decision.STOP
        plan = outgoing(
            letter,
            source_fifo=self.source_fifo,
            key_source=self.target.key_source,
            max_bytes=self.source.max_message_bytes,
            run_id=self.run_id,
        )
        inspection = self._inspect(letter, plan)
        kept = self._kept(plan)
        if self.dry_run:
            return self._preview(letter, plan, inspection, kept)
        head = f"{letter.message_id} (group {plan.group_id or '-'})"
        if kept:
            return self._keep(letter, "kept", f"kept {head}: {kept}")
        if plan.problem:
            self.progress.line(
                f"{head}: {plan.problem}; redriven anyway (--force): the consumer keys it afresh"
            )
        if self._forgets(inspection):
            stays = self._forget(letter, plan, inspection, head)
            if stays is not None:
                return stays
        return self._send(letter, plan, inspection, head)

    def _kept(self, plan: Outgoing) -> str | None:
        """Why the run leaves this dead letter in the DLQ, stopping its group, before trying to send it."""
        if plan.blocked:
            return plan.blocked
        if plan.problem and not self.force:
            return f"{plan.problem}; --force redrives it with a new key"
        return None

    # -- dry run --------------------------------------------------------------------------------------

    def _preview(
        self, letter: DeadLetter, plan: Outgoing, inspection: Inspection | None, kept: str | None
    ) -> Decision:
        """What the run would do with this dead letter, as far as it can be known without sending."""
        line = f"{letter.message_id} group {plan.group_id or '-'}{self._state(inspection)}"
        self.copies[letter.identity] = (letter.message_id, None if kept else "")
        if kept:
            self.tally.outcomes["kept"] += 1
            line += f"; kept: {kept}"
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
        return Decision.LEAVE_AND_STOP_GROUP if kept else Decision.LEAVE

    def _state(self, inspection: Inspection | None) -> str:
        if inspection is None:
            self.tally.states["unknown"] += 1
            return ": key state unknown (the consumer is unknown: name it with --stack or --function)"
        self.tally.states[inspection.state.value] += 1
        key = f" key {inspection.key_text}" if inspection.key_text else ""
        text = f"{key}: {MEANING[inspection.state]}"
        if inspection.state is State.CONFLICT:
            text += f" [stored fingerprint {inspection.stored_fingerprint}, this {inspection.fingerprint}]"
        if inspection.state is State.INVALID and inspection.reason:
            text += f" [{inspection.reason}]"
        return text

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
                f"{head}: key {inspection.key_text} was {inspection.state.value}; not forgotten: the "
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
                f"kept {head}: key {inspection.key_text} changed since it was inspected (it was "
                f"{inspection.state.value}): not forgotten, not redriven; run again to see its state now",
            )
        self.tally.forgotten.add((inspection.key.partition, inspection.key.sort))
        self.progress.line(
            f"{head}: key {inspection.key_text} was {inspection.state.value}; forgot it "
            f"({FORGET_MEANING.get(self.keys.mode, 'its record is deleted')})"
        )
        return None

    def _send(self, letter: DeadLetter, plan: Outgoing, inspection: Inspection | None, head: str) -> Decision:
        self.pace.wait()
        try:
            self.sending = letter
            response = self.source.send(plan.request(self.source.url))
        except (ClientError, BotoCoreError) as exc:
            self.sending = None
            return self._keep(
                letter, "send failed", f"kept {head}: the send to the source queue failed: {exc}"
            )
        new_id = response.get("MessageId", "")
        dropped_as = self._dropped(letter, plan, response)
        if dropped_as is not None:
            self.sending = None
            return self._keep(
                letter,
                "dropped by SQS",
                f"kept {head}: SQS accepted the send but dropped it as a duplicate of message {dropped_as} "
                f"(deduplication id {plan.dedup_id} was used within the last 5 minutes); redrive it again "
                f"after {self._retry_after(letter, dropped_as)}",
            )
        self.known_ids[new_id] = time.time() * 1000
        self.sent += 1
        try:
            self.dlq.delete(letter)
        except (ClientError, BotoCoreError) as exc:
            self.sending = None
            self.tally.outcomes["not deleted"] += 1
            self.progress.line(
                f"{head} was sent as {new_id} but the dead letter could not be deleted ({exc}): it is "
                "still in the DLQ; redriving it again is a duplicate the pipeline absorbs"
            )
            self.progress.step("not deleted")
            return self._refused(exc)
        self.sending = None
        self.copies[letter.identity] = (letter.message_id, new_id)
        self.tally.outcomes["redriven"] += 1
        dedup = ""
        if self.source_fifo:
            dedup = (
                ", deduplication id restored"
                if plan.dedup_restored
                else f", deduplication id {plan.dedup_id}"
            )
        state = f"; key was {inspection.state.value}" if inspection is not None else ""
        self.progress.line(f"redriven {head} as {new_id}{dedup}{state}")
        for note in plan.notes:
            self.progress.line(f"    note: {note}")
        self.progress.step("redriven")
        return Decision.DELETED

    def _reuses_dedup_key(self, plan: Outgoing) -> bool:
        """Whether the consumer keys ``plan`` by the deduplication id it is sent with (see _forget)."""
        return self.source_fifo and _keyed_by_dedup_id(plan, self.target.key_source)

    def _forgets(self, inspection: Inspection | None) -> bool:
        """Whether --force deletes this key's record before the send (once per key and run)."""
        if not self.force or inspection is None or inspection.key is None:
            return False
        if inspection.state not in FORCED:
            return False
        return (inspection.key.partition, inspection.key.sort) not in self.tally.forgotten

    def _copy(self, letter: DeadLetter, first: str, sent_as: str | None) -> Decision:
        """A later copy of a dead letter this run visited: it stays with it, or is deleted after its send."""
        head = f"{letter.message_id} (group {letter.original_group_id or '-'})"
        if sent_as is None:
            self.tally.outcomes["copy left"] += 1
            self.progress.line(f"kept {head}: a copy of {first}, which stays")
            self.progress.step("copy left")
            return Decision.LEAVE_AND_STOP_GROUP
        if not self.dry_run:
            try:
                self.dlq.delete(letter)
            except (ClientError, BotoCoreError) as exc:
                self.tally.outcomes["copy not deleted"] += 1
                self.progress.line(f"{head}, a copy of {first}, could not be deleted ({exc})")
                self.progress.step("copy not deleted")
                return self._refused(exc)
        self.tally.outcomes["copy deleted"] += 1
        done = f"deleted after its send as {sent_as}" if sent_as else "deleted after its send"
        self.progress.line(f"{head}: a copy of {first}: {done}")
        self.progress.step("copy deleted")
        return Decision.LEAVE if self.dry_run else Decision.DELETED

    def _refused(self, exc: Exception) -> Decision:
        # botocore has retried what may pass: every further send would leave a copy in both queues too.
        self.stopped = (
            f"stopped: the DLQ refused DeleteMessage ({exc}): every further send would leave a copy in both "
            "queues"
        )
        return Decision.STOP

    def _keep(self, letter: DeadLetter, outcome: str, line: str) -> Decision:
        self.copies.setdefault(letter.identity, (letter.message_id, None))
        self.tally.outcomes[outcome] += 1
        self.progress.line(line)
        self.progress.step(outcome)
        return Decision.LEAVE_AND_STOP_GROUP

    def _dropped(self, letter: DeadLetter, plan: Outgoing, response: dict[str, Any]) -> str | None:
        """The id of the message SQS deduplicated the send against, or None if it was enqueued."""
        if not self.source_fifo:
            return None
        new_id = response.get("MessageId", "")
        known = {*letter.message_ids, *self.known_ids}
        return new_id if new_id in known else None

    def _retry_after(self, letter: DeadLetter, dropped_as: str) -> str:
        """When the deduplication id the send was dropped for is free again: 5 minutes after the message it
        duplicated was sent (a send of this run, or one sent before the dead letter reached the DLQ)."""
        sent_ms = self.known_ids.get(dropped_as) or letter.sent_ms
        now_ms = time.time() * 1000
        free_ms = sent_ms + DEDUPLICATION_WINDOW_MS if sent_ms else 0
        if free_ms <= now_ms:
            free_ms = now_ms + DEDUPLICATION_WINDOW_MS
        return utc_text(math.ceil(free_ms / 1000))

    def _inspect(self, letter: DeadLetter, plan: Outgoing) -> Inspection | None:
        if self.keys is None or self._inspect_warning:
            return None
        try:
            return self.keys.inspect(plan, message_id=letter.message_id)
        except (ClientError, BotoCoreError) as exc:
            if self.dry_run or self.force:
                raise DlqError(f"cannot read the idempotency table {self.keys.table_name}: {exc}") from None
            self._inspect_warning = True
            self.progress.line(
                f"warning: cannot read the idempotency table ({exc}); key states are not shown"
            )
            return None


def _keyed_by_dedup_id(plan: Outgoing, key_source: str | None) -> bool:
    """Whether the consumer keys ``plan`` by the MessageDeduplicationId it is sent with: KEY_SOURCE=dedup_id
    (or unknown) and no original deduplication id in ``idempotency.redrive`` (which the runtime reads
    first)."""
    if key_source not in (None, contract.KeySource.DEDUP_ID):
        return False
    return not (plan.redrive and plan.redrive.get("dedup_id"))


def _run_of(letter: DeadLetter) -> str | None:
    earlier = letter.earlier_redrive
    value = earlier.get(RUN_FIELD) if earlier else None
    return value if isinstance(value, str) else None
