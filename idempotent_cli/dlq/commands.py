"""The four commands: list, show, redrive, purge."""

from __future__ import annotations

import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from idempotent_runtime import contract

from idempotent_cli.aws import Clients
from idempotent_cli.console import Console, Pace, Progress
from idempotent_cli.dlq.keystate import FORGET_MEANING, MEANING, KeyTable
from idempotent_cli.dlq.letters import (
    MOVED,
    DeadLetter,
    Filters,
    Which,
    attribute_text,
    by_identity,
    new_run_id,
    oldest_first,
    outgoing,
    utc_text,
)
from idempotent_cli.dlq.queue import (
    DEFAULT_VISIBILITY_SECONDS,
    MAX_BATCH,
    Counts,
    Decision,
    Queue,
    Walk,
    walk,
)
from idempotent_cli.dlq.redrive import Preview, Redriver
from idempotent_cli.dlq.target import Target, target_of
from idempotent_cli.errors import DlqError
from idempotent_cli.stack import queue_arn_of

REASON_WIDTH = 100
REPORTED_GROUPS = 10  # the groups a line names, at most


@dataclass
class Context:
    """What every command gets: the target, the clients, the console and the common options."""

    target: Target
    clients: Clients
    console: Console
    visibility_seconds: int = DEFAULT_VISIBILITY_SECONDS
    wait_seconds: int = 1

    def dlq(self, *, visibility_seconds: int | None = None) -> Queue:
        return Queue(
            self.clients("sqs"),
            self.target.dlq_url,
            visibility_seconds=visibility_seconds or self.visibility_seconds,
            wait_seconds=self.wait_seconds,
        )

    def source(self) -> Queue:
        if not self.target.source_url:
            raise DlqError(
                f"the source queue of {self.target.dlq_url} is unknown: pass --source-queue-url (or --stack)"
            )
        return Queue(self.clients("sqs"), self.target.source_url)

    def keys(self, *, required: bool, why: str) -> KeyTable | None:
        environment = self.target.pipeline.environment
        if environment is None:
            if required:
                raise DlqError(
                    f"{why} needs the consumer's configuration (its table and key source): name the pipeline "
                    "with --stack, or the consumer with --function"
                )
            return None
        source = self.target.source_url
        queue_arn = queue_arn_of(self.clients, source) if source else "arn:aws:sqs:::unknown"
        try:
            return KeyTable(
                environment, self.clients("dynamodb"), queue_arn=queue_arn, region=self.clients.region
            )
        except DlqError as exc:
            if required:
                raise
            self.console.note(f"note: key states are not shown: {exc}")
            return None

    @classmethod
    def of_consumer(
        cls, clients: Clients, pipeline: Any, console: Console, *options: int
    ) -> tuple[Context, KeyTable]:
        """A consumer's: its DLQ and its table (``options``: the visibility and wait seconds)."""
        context = cls(target_of(clients, pipeline), clients, console, *options)
        keys = context.keys(required=True, why="trace")
        assert keys is not None
        return context, keys

    def walk(self, dlq: Queue, visit: Callable[..., Any], **options: Any) -> Walk:
        """:func:`queue.walk` of ``dlq`` on the console's clock (``options``: ``batches``)."""
        console = self.console
        return walk(dlq, self.target.which, visit, clock=console.clock, sleep=console.sleep, **options)

    def header(self, dlq: Queue, counts: Counts) -> None:
        pipeline = self.target.pipeline
        kind = (
            "subscription dead-letter queue"
            if self.target.which is Which.SUBSCRIPTION
            else "dead-letter queue"
        )
        fifo = " (FIFO)" if self.target.dlq_url.endswith(".fifo") else ""
        of = f" of {pipeline.title}" if pipeline.stack or pipeline.function else ""
        self.console.print(f"{kind} {self.target.dlq_url}{fifo}{of}, in {self.clients.where}")
        if self.target.source_url:
            self.console.print(f"source queue {self.target.source_url}")
        policy = dlq.attributes.get("RedrivePolicy")
        if policy:
            self.console.print(
                f"! this DLQ has a redrive policy of its own ({policy}): every read by this tool counts as a "
                "receive towards it"
            )
        self.console.print(
            f"{counts.total} message(s): {counts.visible} visible, {counts.in_flight} in flight"
            + (f", {counts.delayed} delayed" if counts.delayed else "")
        )


def report_walk(console: Console, result: Walk) -> None:
    """What the walk could not reach, in words."""
    if result.not_reached and result.fifo:
        groups = ", ".join(result.full_groups[:REPORTED_GROUPS])
        if len(result.full_groups) > REPORTED_GROUPS:
            groups += f" and {len(result.full_groups) - REPORTED_GROUPS} more"
        console.print(
            f"! {result.not_reached} message(s) not read: a FIFO queue hands out at most 10 messages of a "
            "group while they are held (by this run or another reader), and these are behind them"
            + (f", in group(s) {groups} (each read up to its 10th)" if groups else "")
            + "; redrive and purge reach them as they remove the ones before"
        )
    elif result.not_reached:
        console.print(
            f"! {result.not_reached} message(s) not read: the queue counts them visible but no receive "
            "returned them (a standard queue answers a receive from some of its servers; they may also have "
            "become visible, or arrived, during the run); run again to read them"
        )
    if result.in_flight_elsewhere:
        hold = result.hold_seconds
        console.print(
            f"! {result.in_flight_elsewhere} message(s) in flight elsewhere (another reader, or an earlier "
            "run whose visibility timeout has not ended): not read. A run of this command hides what it "
            f"reads for {hold} s at a time (--visibility-timeout; longer with --rate): after one stopped or "
            f"was killed they are visible again within {hold} s, by "
            f"{utc_text(math.ceil(time.time()) + hold)} at the latest; run again then"
        )
    if result.release_errors:
        console.print(
            f"! {len(result.release_errors)} message(s) could not be made visible again at once "
            f"({result.release_errors[0]}); they become visible when their visibility timeout ends"
        )


def report_unread(console: Console, result: Walk) -> int:
    """For commands that act on what they choose: how many messages they could not read (and so could not
    act on), said in the summary."""
    unread = result.not_reached + result.in_flight_elsewhere
    if unread:
        console.print(
            f"not finished: {unread} message(s) could not be read (see above) and may be among those "
            "chosen; they stay in the DLQ"
        )
    return unread


# -- list -----------------------------------------------------------------------------------------------


def cmd_list(context: Context, *, filters: Filters, messages: bool, as_json: bool) -> int:
    dlq = context.dlq()
    counts = dlq.counts()
    seen: list[DeadLetter] = []
    max_receive = context.target.max_receive_count

    def visit(letter: DeadLetter) -> Decision:
        if filters.matches(letter, max_receive):
            seen.append(letter)
        return Decision.LEAVE

    result = context.walk(dlq, visit)
    copies = by_identity(oldest_first(seen))  # a dead letter the runtime sent twice counts once
    letters = [first for first, *_ in copies.values()]
    groups: dict[str, list[DeadLetter]] = defaultdict(list)
    reasons: dict[tuple[str, str], list[DeadLetter]] = defaultdict(list)
    for letter in letters:
        groups[letter.original_group_id or "-"].append(letter)
        reasons[(letter.kind, _reason_label(letter, max_receive))].append(letter)
    if as_json:
        context.console.print(
            json.dumps(
                {
                    "queue": context.target.dlq_url,
                    "source_queue": context.target.source_url,
                    "messages_in_queue": counts.total,
                    "read": result.visited,
                    "matching": len(letters),
                    "not_reached": result.not_reached,
                    "in_flight_elsewhere": result.in_flight_elsewhere,
                    "groups": [
                        {"group": g, "messages": len(ls), "oldest": ls[0].sent_at} for g, ls in groups.items()
                    ],
                    "reasons": [
                        {"kind": k, "reason": r, "messages": len(ls), "oldest": ls[0].sent_at}
                        for (k, r), ls in reasons.items()
                    ],
                    "message_list": [
                        letter_summary(letter, max_receive, copies[letter.identity]) for letter in letters
                    ]
                    if messages
                    else None,
                },
                indent=2,
            )
        )
        return 0
    context.header(dlq, counts)
    read = f"{result.visited} read" + (f", {len(letters)} matching {filters.describe()}" if filters else "")
    several = sum(len(members) > 1 for members in copies.values())
    if several:
        read += f"; {len(letters)} dead letter(s), counted once: {several} of them in several copies"
    context.console.print(read)
    if letters:
        width = max(len("GROUP"), *(len(g) for g in groups))
        context.console.print("by group, oldest first:")
        context.console.print(f"  {'GROUP':<{width}}  MESSAGES  OLDEST")
        for group, members in groups.items():
            context.console.print(f"  {group:<{width}}  {len(members):>8}  {members[0].sent_at}")
        context.console.print("by reason, oldest first:")
        context.console.print(f"  {'KIND':<13} MESSAGES  REASON")
        for (kind, reason), members in reasons.items():
            context.console.print(f"  {kind:<13} {len(members):>8}  {reason}{_receive_counts(kind, members)}")
    if messages and letters:
        context.console.print("messages, oldest first:")
        for letter in letters:
            context.console.print(message_line(letter, max_receive, len(copies[letter.identity])))
    report_walk(context.console, result)
    return 0


def message_line(letter: DeadLetter, max_receive: int | None, copies: int) -> str:
    """One dead letter in a list: id, group, sent, kind, reason (and how many copies it has)."""
    return (
        f"  {letter.message_id}  {letter.original_group_id or '-'}  {letter.sent_at}  {letter.kind}  "
        f"{_short(letter.describe(max_receive))}" + (f"  ({copies} copies)" if copies > 1 else "")
    )


def _reason_label(letter: DeadLetter, max_receive: int | None) -> str:
    if letter.kind == MOVED:
        after = f"after {max_receive} receives" if max_receive else "after maxReceiveCount"
        return f"moved by SQS {after}, no reason from the runtime"
    return _short(letter.describe(max_receive))


def _receive_counts(kind: str, letters: list[DeadLetter]) -> str:
    """For messages SQS moved: how often they were received (reads of the DLQ included)."""
    if kind != MOVED:
        return ""
    counts = sorted({letter.receive_count for letter in letters})
    text = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f" (receive count {text}, reads of the DLQ included)"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_WIDTH else text[: REASON_WIDTH - 3] + "..."


def letter_summary(letter: DeadLetter, max_receive: int | None, copies: list[DeadLetter]) -> dict[str, Any]:
    return {
        "message_id": letter.message_id,
        "copies": [copy.message_id for copy in copies],  # every message of this dead letter in the DLQ
        "source_message_id": letter.source_message_id,
        "message_ids": list(letter.message_ids),
        "group": letter.original_group_id,
        "sent": letter.sent_at,
        "kind": letter.kind,
        "reason": letter.describe(max_receive),
        "receive_count": letter.receive_count,
    }


# -- show -----------------------------------------------------------------------------------------------


def cmd_show(context: Context, *, message_id: str, as_json: bool) -> int:
    """``show``: the dead letter that has had ``message_id``."""
    letter, copies = find(context, message_id)
    source = context.source() if context.target.source_url else None
    plan = outgoing(
        letter,
        source_fifo=bool(source and source.fifo),
        key_source=context.target.key_source,
        max_bytes=source.max_message_bytes if source else contract.SQS_MESSAGE_BYTES,
        run_id=new_run_id(),
    )
    keys = context.keys(required=False, why="show")
    inspection = keys.inspect(plan, message_id=letter.message_id) if keys else None
    if as_json:
        context.console.print(
            json.dumps(
                {
                    **letter_summary(letter, context.target.max_receive_count, copies),
                    "queue": context.target.dlq_url,
                    "dlq_group": letter.group_id,
                    "dlq_dedup_id": letter.dedup_id,
                    "original_dedup_id": letter.original_dedup_id,
                    "origin": letter.origin.value,
                    "details": letter.details,
                    "attributes": {name: attribute_text(v) for name, v in letter.attributes.items()},
                    "body": letter.body,
                    "redrive": {
                        "group": plan.group_id,
                        "dedup_id": plan.dedup_id,
                        "dedup_restored": plan.dedup_restored,
                        "redrive_attribute": plan.redrive,
                        "problem": plan.problem,
                        "blocked": plan.blocked,
                    },
                    "key_state": inspection.state.value if inspection else None,
                    "key": str(inspection.key) if inspection and inspection.key else None,
                },
                indent=2,
            )
        )
        return 0
    _show_letter(context, letter, copies)
    out = context.console.print
    if context.target.source_url:
        restored = "restored" if plan.dedup_restored else "new"
        dedup_text = f", deduplication id {plan.dedup_id} ({restored})" if plan.dedup_id else ""
        out(f"redrive sends      group {plan.group_id or '-'}{dedup_text}")
        if plan.blocked:
            out(f"                   not at all: {plan.blocked}")
        elif plan.problem:
            out(f"                   not without --force: {plan.problem}")
        for note in plan.notes:
            out(f"                   note: {note}")
    if inspection is not None:
        out(f"key state          {inspection.key or '-'}: {MEANING[inspection.state]}")
    return 0


def find(context: Context, message_id: str) -> tuple[DeadLetter, list[DeadLetter]]:
    """The dead letter that has had ``message_id``, and all its copies in the DLQ (DlqError: none)."""
    found: list[DeadLetter] = []
    seen: list[DeadLetter] = []

    def visit(letter: DeadLetter) -> Decision:
        seen.append(letter)
        if not found and message_id in letter.message_ids:
            found.append(letter)
        # Read on for its copies, which only the runtime's dead letters have.
        return Decision.STOP if found and found[0].identity == found[0].message_id else Decision.LEAVE

    result = context.walk(context.dlq(), visit)
    if not found:
        report_walk(context.console, result)
        raise DlqError(
            f"no message {message_id} (its id in the DLQ, the original's, or a redriven copy's) among the "
            f"{result.visited} read from {context.target.dlq_url}; `dlq list --messages` shows their ids "
            "(an id `sns publish` printed is the topic's, not the queue's)"
        )
    return found[0], [other for other in seen if other.identity == found[0].identity]


def _show_letter(context: Context, letter: DeadLetter, copies: list[DeadLetter]) -> None:
    """What the dead letter says, for `show`."""
    out = context.console.print
    out(f"message            {letter.message_id}  (in {context.target.dlq_url})")
    out(f"source message id  {letter.source_message_id or '-'}")
    if len(copies) > 1:
        out(
            f"copies             {len(copies)}: {', '.join(copy.message_id for copy in copies)} (the runtime "
            "sent it more than once: one dead letter, redriven once)"
        )
    delivered = letter.details.get("source_message_id") if letter.details else None
    if isinstance(delivered, str) and delivered and delivered != letter.source_message_id:
        out(f"dead-lettered as   {delivered} (the redriven copy the consumer quarantined: the id it logged)")
    out(f"group              {letter.original_group_id or '-'}")
    dedup = letter.original_dedup_id or "unknown"
    out(f"deduplication id   {dedup} (in the DLQ: {letter.dedup_id or '-'})")
    out(
        f"sent to the queue  {letter.sent_at}; receive count {letter.receive_count} "
        "(reads of the DLQ included)"
    )
    out(f"kind               {letter.kind}")
    out(f"reason             {letter.describe(context.target.max_receive_count)}")
    if letter.key_text:
        out(f"key                {letter.key_text}")
    if letter.details is not None:
        out("details")
        for line in json.dumps(letter.details, indent=2, sort_keys=True).splitlines():
            out(f"  {line}")
    if letter.earlier_redrive is not None:
        out(f"redriven before    {json.dumps(letter.earlier_redrive)}")
    if letter.attributes:
        out("attributes")
        for name, value in sorted(letter.attributes.items()):
            out(f"  {name} ({value.get('DataType')}): {_short(attribute_text(value))}")
    out("body")
    for line in (letter.body or "").splitlines() or [""]:
        out(f"  {line}")


# -- redrive --------------------------------------------------------------------------------------------


def cmd_redrive(
    context: Context,
    *,
    filters: Filters,
    dry_run: bool,
    force: bool,
    yes: bool,
    rate: float | None,
    limit: int | None,
) -> int:
    source = context.source()
    pace = Pace(rate, context.console)
    # What one visit holds (up to 10 receives of 10) must be sent before it becomes visible again.
    visibility = context.visibility_seconds
    if rate:
        visibility = max(visibility, math.ceil(MAX_BATCH * MAX_BATCH / rate) * 2 + 30)
    dlq = context.dlq(visibility_seconds=visibility)
    if context.target.which is Which.DLQ and source.url == dlq.url:
        raise DlqError("the source queue is the dead-letter queue itself")
    keys = context.keys(required=dry_run or force, why="--dry-run" if dry_run else "--force")
    counts = dlq.counts()
    context.header(dlq, counts)
    verb = "checking" if dry_run else "redriving"
    context.console.print(
        f"{verb} {filters.describe()} to {source.url}" + (f" at most {rate:g}/s" if rate else "")
    )
    if force and not dry_run:
        assert keys is not None
        context.console.confirm(
            f"--force deletes the idempotency record of every key that is done, in table {keys.table_name} "
            f"({keys.mode} mode: {FORGET_MEANING.get(keys.mode, 'its record is deleted')}), so those "
            "messages "
            "are processed again.",
            yes=yes,
        )
    progress = Progress(context.console, counts.total, "checked" if dry_run else "done", long=bool(rate))
    visitor = Preview if dry_run else Redriver
    redriver = visitor(context.target, source, dlq, progress, filters, keys, pace, force=force, limit=limit)
    try:
        result = context.walk(dlq, redriver, batches=True)
    except KeyboardInterrupt:
        progress.finish()
        if redriver.sending:
            ids = ", ".join(letter.message_id for letter in redriver.sending)
            it = "it" if len(redriver.sending) == 1 else "each"
            context.console.note(
                f"interrupted while redriving {ids}: {it} may be in the source queue and still in the DLQ; "
                "redriving it again is a duplicate the pipeline absorbs"
            )
        raise
    finally:
        progress.finish()
    tally = redriver.tally
    if dry_run:
        states = ", ".join(f"{n} {state}" for state, n in sorted(tally.states.items())) or "no message"
        would = f"; {redriver.sent} would be redriven" if tally.states else ""
        would += "".join(
            f", {tally.outcomes[name]} {name}"
            for name in ("kept", "skipped", "copy left", "copy deleted")
            if tally.outcomes[name]
        )
        if tally.forgotten:
            would += f"; --force would forget {len(tally.forgotten)} key(s)"
        if result.not_reached + result.in_flight_elsewhere:
            would += (
                f"; {result.not_reached + result.in_flight_elsewhere} not read: their keys, and what a "
                "redrive would do with them, are unknown until it reads them"
            )
        context.console.print(f"dry run: {states}{would}; nothing was changed")
    else:
        outcomes = ", ".join(f"{n} {name}" for name, n in sorted(tally.outcomes.items())) or "no message"
        context.console.print(f"{outcomes}")
        if tally.forgotten:
            context.console.print(f"forgot {len(tally.forgotten)} key(s) (--force)")
    for group, message_id in result.stopped_groups.items():
        context.console.print(
            f"group {group}: stopped at {message_id}; its later messages stay in the DLQ, in order"
        )
    if result.behind_stopped:
        context.console.print(f"{result.behind_stopped} later message(s) of stopped groups left in place")
    if redriver.stopped:
        context.console.print(redriver.stopped)
    report_walk(context.console, result)
    unread = 0 if redriver.stopped else report_unread(context.console, result)
    return 1 if tally.failed or unread else 0


# -- purge ----------------------------------------------------------------------------------------------


# The question before a purge lists at most this many of the dead letters it deletes.
PURGE_QUESTION_LINES = 20


def _purge_preview(context: Context, dlq: Queue, filters: Filters) -> tuple[list[list[DeadLetter]], Walk]:
    """What purge would delete, read first: the chosen dead letters, each with its copies."""
    max_receive = context.target.max_receive_count
    chosen: dict[str, list[DeadLetter]] = {}

    def visit(letter: DeadLetter) -> Decision:
        if letter.identity in chosen:
            chosen[letter.identity].append(letter)  # its copies go with it, counted once
        elif filters.matches(letter, max_receive):
            chosen[letter.identity] = [letter]
        return Decision.LEAVE

    result = context.walk(dlq, visit)
    return list(chosen.values()), result


def _purge_what(dlq: Queue, filters: Filters, chosen: list[list[DeadLetter]], result: Walk) -> str:
    """The dead letters purge deletes, in words, counted by kind."""
    what = (
        f"the {len(chosen)} dead letter(s) matching {filters.describe()}"
        if filters
        else (f"all {len(chosen)} dead letter(s)")
    )
    what += f" from {dlq.url}"
    kinds = Counter(first.kind for first, *_ in chosen)
    if kinds:
        what += " (by kind: " + ", ".join(f"{n} {kind}" for kind, n in kinds.most_common()) + ")"
    if result.not_reached:
        what += (
            f", and {'those' if filters else 'all'} of the {result.not_reached} message(s) behind 10 of a "
            f"FIFO group, which it reads as it deletes the ones before"
            + (" and deletes if they match" if filters else "")
        )
    return what


def cmd_purge(context: Context, *, filters: Filters, yes: bool, dry_run: bool = False) -> int:
    dlq = context.dlq()
    counts = dlq.counts()
    context.header(dlq, counts)
    max_receive = context.target.max_receive_count
    if yes and not dry_run:
        what = f"the messages matching {filters.describe()}" if filters else f"all {counts.total} message(s)"
        what += f" from {dlq.url}"
    else:
        chosen, preview = _purge_preview(context, dlq, filters)
        shown = chosen if dry_run else chosen[:PURGE_QUESTION_LINES]
        for first, *others in shown:
            context.console.print(message_line(first, max_receive, 1 + len(others)))
        if len(shown) < len(chosen):
            context.console.print(
                f"  ... and {len(chosen) - len(shown)} more (`purge --dry-run` lists them all)"
            )
        what = _purge_what(dlq, filters, chosen, preview)
        if dry_run:
            context.console.print(f"dry run: purge would delete {what}; nothing was changed")
            report_walk(context.console, preview)
            return 1 if report_unread(context.console, preview) else 0
    context.console.confirm(f"purge deletes {what} for good.", yes=yes)
    progress = Progress(context.console, counts.total, "deleted")
    deleted: dict[str, DeadLetter] = {}  # by identity: a dead letter's copies are purged with it
    copies = 0

    def visit(letter: DeadLetter) -> Decision:
        nonlocal copies
        first = deleted.get(letter.identity)
        if first is None and not filters.matches(letter, max_receive):
            return Decision.LEAVE
        dlq.delete(letter)
        head = f"deleted {letter.message_id} (group {letter.original_group_id or '-'})"
        if first is None:
            deleted[letter.identity] = letter
            progress.line(f"{head}: {_short(letter.describe(max_receive))}")
        else:
            copies += 1
            progress.line(f"{head}: a copy of {first.message_id}")
        progress.step("deleted")
        return Decision.DELETED

    try:
        result = context.walk(dlq, visit)
    finally:
        progress.finish()
    left = len(result.left)
    noun, of = ("copy" if copies == 1 else "copies"), ("it" if len(deleted) == 1 else "them")
    also = f" (and {copies} {noun} of {of})" if copies else ""
    context.console.print(
        f"deleted {len(deleted)}{also}; {left} left in the queue" + (" by the filters" if filters else "")
    )
    if deleted:
        kinds = Counter(letter.kind for letter in deleted.values())
        context.console.print("deleted by kind: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common()))
    report_walk(context.console, result)
    return 1 if report_unread(context.console, result) else 0
