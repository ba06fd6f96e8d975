"""The contract between the constructs and the runtime: every name, default, closed set and limit, once.

The runtime imports this module inside the Lambda; the constructs import it at synth time to write the
function's environment, grant IAM actions and check props. Standard library only, and nothing here does
I/O. ``docs/runtime-contract.md`` is the prose form of this module (a test keeps them in step).
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, NoReturn


class ConfigurationError(ValueError):
    """A configuration that cannot work: raised by the constructs at synth time (naming the prop and the
    value received) and by the runtime at cold start (naming the environment variable)."""


# --- closed sets -----------------------------------------------------------------------------------------


class Mode(StrEnum):
    """How a message becomes exactly one effect."""

    DOCUMENT = "document"  # one conditional PutItem of the document the message describes
    TRANSACTION = "transaction"  # the processor's writes and a marker in one TransactWriteItems
    GUARDED = "guarded"  # effects outside DynamoDB behind a fenced lease
    VERSIONED = "versioned"  # the latest state per entity: a conditional PutItem if the version is newer


class KeySource(StrEnum):
    """Where a record's idempotency key comes from."""

    FIELDS = "fields"  # two body fields (dotted paths)
    DEDUP_ID = "dedup_id"  # the SQS MessageDeduplicationId (FIFO only)
    MESSAGE_ID = "message_id"  # the SQS messageId
    BODY_SHA256 = "body_sha256"  # a SHA-256 of the raw body
    FIELD = "field"  # one body field (a dotted path); the sort key holds the field's path


class QueueType(StrEnum):
    """FIFO: records of one MessageGroupId run in order. Standard: every record is independent, even one
    that carries a MessageGroupId (SQS fair queues)."""

    FIFO = "fifo"
    STANDARD = "standard"


# Key sources that exist only on FIFO queues: a standard queue's messages carry no MessageDeduplicationId.
FIFO_ONLY_KEY_SOURCES = frozenset({KeySource.DEDUP_ID})
# SQS: the name of a FIFO queue - and so its ARN and URL - ends with this.
FIFO_QUEUE_SUFFIX = ".fifo"


class OnConflict(StrEnum):
    """What a delivery whose key is done with a different payload fingerprint becomes."""

    QUARANTINE = "quarantine"  # to the DLQ with both fingerprints in the reason
    DUPLICATE = "duplicate"  # counted and logged at WARNING, then treated as a duplicate


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


class Outcome(StrEnum):
    """The one final outcome of a record in an invocation; the five add up to the batch size."""

    PROCESSED = "processed"  # this invocation applied the effect
    DUPLICATE = "duplicate"  # the key was already done with the same payload (or conflicts are duplicates)
    STALE = "stale"  # versioned: the key holds a newer version; nothing written, not dead-lettered
    QUARANTINED = "quarantined"  # sent to the DLQ with a reason; deleted from the source queue
    FAILED = "failed"  # reported as a batch item failure: SQS delivers it again


class Metric(StrEnum):
    """The Embedded Metric Format counters of one batch (unit Count, dimension FunctionName).

    The outcome counters (``processed``, ``duplicates``, ``stale``, ``quarantined``, ``failed``) add up to
    the batch size; ``conflicts`` and ``misconfigured`` count records that also have one of those outcomes
    (a conflict is quarantined or a duplicate, a record failed because of the deployment is failed).
    """

    PROCESSED = "processed"
    DUPLICATES = "duplicates"
    QUARANTINED = "quarantined"
    FAILED = "failed"
    CONFLICTS = "conflicts"
    MISCONFIGURED = "misconfigured"
    STALE = "stale"


OUTCOME_METRIC = {
    Outcome.PROCESSED: Metric.PROCESSED,
    Outcome.DUPLICATE: Metric.DUPLICATES,
    Outcome.STALE: Metric.STALE,
    Outcome.QUARANTINED: Metric.QUARANTINED,
    Outcome.FAILED: Metric.FAILED,
}
# Counters only one mode can move: the other modes leave them out of their metric lines (each metric a
# function reports is a CloudWatch custom metric, paid for per month).
MODE_METRICS = {Metric.STALE: Mode.VERSIONED}


def metrics_of(mode: Mode) -> tuple[Metric, ...]:
    """The counters of ``mode``'s metric lines, in :class:`Metric` order."""
    return tuple(metric for metric in Metric if MODE_METRICS.get(metric, mode) == mode)


# The one dimension of every metric: the runtime writes the function's name under it, the constructs' alarms
# and dashboard read it.
METRICS_DIMENSION = "FunctionName"


class DeadLetterKind(StrEnum):
    """Why the runtime sent a message to the DLQ (``kind`` in :data:`DLQ_DETAILS_ATTRIBUTE`)."""

    INVALID = "invalid"  # the runtime cannot key or store it (bad JSON, missing key, number out of range...)
    REJECTED = "rejected"  # the processor raised PermanentError, or its own transaction condition failed
    CONFLICT = "conflict"  # the key is done with a different payload fingerprint
    EXHAUSTED = "exhausted"  # failed on its last receive (MAX_RECEIVE_COUNT): SQS would redrive it now
    UNPUBLISHABLE = "unpublishable"  # the relay: the emit target refused an emitted message for good


# --- IAM: the actions the runtime uses -----------------------------------------------------------------

_ITEM_WRITES = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
TABLE_ACTIONS: dict[Mode, tuple[str, ...]] = {
    Mode.DOCUMENT: ("dynamodb:PutItem",),
    Mode.VERSIONED: ("dynamodb:PutItem",),
    Mode.GUARDED: _ITEM_WRITES,
    Mode.TRANSACTION: (*_ITEM_WRITES, "dynamodb:ConditionCheckItem"),  # the processor's entries may check
}
# DynamoDB encrypts and decrypts with a customer-managed table key on the caller's behalf.
TABLE_KEY_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")
DLQ_ACTIONS = ("sqs:SendMessage",)
DLQ_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
# After a quarantined record is in the DLQ the runtime deletes it from its source queue (the SQS event
# source's grant already includes this action).
SOURCE_QUEUE_ACTIONS = ("sqs:DeleteMessage",)

# --- what the runtime writes ---------------------------------------------------------------------------

# Key values that begin with this belong to the runtime (transaction markers, quarantine records): a
# message whose key begins with it is quarantined, a processor may not write there, and a KEY_PREFIX may
# not begin with it.
RESERVED_KEY_PREFIX = "idempotency#"
# transaction mode: the marker of key (p, s) is (KEY_PREFIX + p, RESERVED_KEY_PREFIX + s).
MARKER_SORT_PREFIX = RESERVED_KEY_PREFIX
# A quarantined record is remembered, so a redelivery does not send it to the DLQ twice:
# (KEY_PREFIX + QUARANTINE_PARTITION_PREFIX + messageId, QUARANTINE_SORT).
QUARANTINE_PARTITION_PREFIX = RESERVED_KEY_PREFIX + "quarantine#"
QUARANTINE_SORT = RESERVED_KEY_PREFIX + "quarantine"
# Quarantine records only need to outlive the source message: SQS keeps a message at most 14 days.
QUARANTINE_TTL_SECONDS = 14 * 24 * 3600

# The runtime's bookkeeping attributes. No body field may begin with this prefix (document mode rejects
# one), so nothing a producer sends can clash with them.
ATTRIBUTE_PREFIX = "idempotency:"
FINGERPRINT_ATTRIBUTE = ATTRIBUTE_PREFIX + "fingerprint"
TOKEN_ATTRIBUTE = ATTRIBUTE_PREFIX + "token"  # one per write attempt: a retried write recognises its own
STATUS_ATTRIBUTE = ATTRIBUTE_PREFIX + "status"
OWNER_ATTRIBUTE = ATTRIBUTE_PREFIX + "owner"
LEASE_ATTRIBUTE = ATTRIBUTE_PREFIX + "lease_expires_at"
RESULT_ATTRIBUTE = ATTRIBUTE_PREFIX + "result"
MESSAGE_ID_ATTRIBUTE = ATTRIBUTE_PREFIX + "message_id"
# The MessageDeduplicationId of the message a record was written for (a redriven message's original one),
# on every record of a message that has one (FIFO): trace tells the emitted message that was applied from
# one taken for a duplicate of another message's identical payload.
DEDUP_ID_ATTRIBUTE = ATTRIBUTE_PREFIX + "dedup_id"
# On a transaction marker or a guarded completion that emitted: where the emitted messages' outbox items are
# (idempotent_runtime.outbox.outbox_keys reads it).
OUTBOX_ATTRIBUTE = ATTRIBUTE_PREFIX + "outbox"
REASON_ATTRIBUTE = ATTRIBUTE_PREFIX + "reason"
# versioned mode: the state's version in one comparable form (N, or S for a timestamp: UTC, fixed width), and
# true on a tombstone (the state of a deleted entity, kept so that older versions stay stale).
VERSION_ATTRIBUTE = ATTRIBUTE_PREFIX + "version"
DELETED_ATTRIBUTE = ATTRIBUTE_PREFIX + "deleted"
# versioned mode: a message whose body has this top-level field set to JSON true is a tombstone.
TOMBSTONE_FIELD = "deleted"


class GuardedStatus(StrEnum):
    """``STATUS_ATTRIBUTE`` of a guarded record."""

    IN_PROGRESS = "IN_PROGRESS"  # claimed: the owner (OWNER_ATTRIBUTE) runs the effect until LEASE_ATTRIBUTE
    COMPLETED = "COMPLETED"  # the effect ran; RESULT_ATTRIBUTE holds its result (JSON text) when it fit


class QuarantineStatus(StrEnum):
    """``STATUS_ATTRIBUTE`` of a quarantine record."""

    SENDING = "SENDING"  # written before the DLQ send: a redelivery sends again (it cannot know)
    SENT = "SENT"  # written after a successful send: a redelivery skips the send


# Guarded records written by 0.1 used these names; the runtime still reads them (a 0.1 COMPLETED record is
# a duplicate with its result, a 0.1 IN_PROGRESS claim whose lease expired can be taken over).
LEGACY_STATUS_ATTRIBUTE = "status"
LEGACY_OWNER_ATTRIBUTE = "owner"
LEGACY_LEASE_ATTRIBUTE = "lease_expires_at"
LEGACY_RESULT_ATTRIBUTE = "result"
LEGACY_MESSAGE_ID_ATTRIBUTE = "message_id"

# --- what the runtime sends to the dead-letter queue ---------------------------------------------------

# SQS message attribute names: letters, digits, '-', '_', '.'; never 'AWS.' or 'Amazon.' first.
DLQ_ATTRIBUTE_PREFIX = "idempotency."
DLQ_REASON_ATTRIBUTE = DLQ_ATTRIBUTE_PREFIX + "reason"  # String: why, at most MAX_REASON_CHARACTERS
# String, a JSON object: kind (DeadLetterKind), source_message_id, group_id, dedup_id (the original
# MessageDeduplicationId: SQS replaces it in a FIFO DLQ), key, receive_count, function, dropped_attributes.
DLQ_DETAILS_ATTRIBUTE = DLQ_ATTRIBUTE_PREFIX + "details"
MAX_REASON_CHARACTERS = 1024
# String, a JSON object {"source_message_id": ..., "dedup_id": ...}: set by the DLQ tool on a redriven
# message. With KEY_SOURCE=message_id the runtime keys the message by source_message_id, with dedup_id by
# dedup_id, so a redriven message keeps its idempotency key. The only incoming `idempotency.*` attribute
# the runtime copies into a DLQ message.
REDRIVE_ATTRIBUTE = DLQ_ATTRIBUTE_PREFIX + "redrive"
# String, a DeadLetterEncoding: set by the relay on a dead letter whose body is not the emitted message's
# own text (the text or its attributes could not travel as they are).
DLQ_ENCODING_ATTRIBUTE = DLQ_ATTRIBUTE_PREFIX + "encoding"


class DeadLetterEncoding(StrEnum):
    """How the relay wrote a dead letter it could not send as the emitted message itself (characters SQS
    refuses, attributes that do not fit beside the runtime's, a size over the queue's)."""

    # The body is base64 of zlib-compressed JSON (ASCII, so exact to the last lone surrogate):
    # {"body": text, "attributes": {name: {DataType, StringValue | BinaryValue (base64)}}} for an emitted
    # message, {"record": NewImage} for a stream record the relay could not read as an outbox item.
    JSON_ZLIB_BASE64 = "json+zlib+base64"
    # Even that did not fit: the body only says so; the outbox item named in the details holds the message
    # until its TTL.
    OMITTED = "omitted"


# --- limits of the services ----------------------------------------------------------------------------

MAX_PARTITION_KEY_BYTES = 2048
MAX_SORT_KEY_BYTES = 1024
MAX_ITEM_BYTES = 400 * 1024
MAX_NESTING_LEVELS = 32  # DynamoDB: nested attributes up to 32 levels deep
MAX_NUMBER_DIGITS = 38  # DynamoDB Number: up to 38 significant digits...
MIN_NUMBER_MAGNITUDE = "1E-130"  # ...and a magnitude from 1E-130
MAX_NUMBER_MAGNITUDE = "9.9999999999999999999999999999999999999E+125"  # to 9.99...E+125
MAX_TRANSACTION_ITEMS = 100
MAX_MESSAGE_ATTRIBUTES = 10  # SQS
# SQS counts a message's body and every attribute (name, type, value) against the queue's maximum message
# size: 262,144 bytes unless a queue says otherwise, the default for years (the maximum is 1 MiB since 2025).
# A dead letter is sized to fit this, or the message it copies when that was larger (its source queue took
# it, and the constructs make both queues alike).
SQS_MESSAGE_BYTES = 262_144
SQS_MAX_MESSAGE_BYTES = 1_048_576  # the largest maximum a queue can have
# SQS (SendMessage): the only characters a body or a string attribute value may hold (XML 1.0's); anything
# else is refused for good (InvalidMessageContents). SNS delivers to SQS, so emitted messages hold only these.
# A regular expression character class's contents, compiled where used.
SQS_CHARACTERS = "\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff"
# SNS and SQS MessageGroupId and MessageDeduplicationId: 1-128 alphanumeric and punctuation characters (no
# space), the whole string (re.fullmatch).
FIFO_ID_PATTERN = re.compile(r"[!-~]{1,128}")
FIFO_MAX_BATCH_SIZE = 10
STANDARD_MAX_BATCH_SIZE = 10_000
SQS_MAX_RETENTION_SECONDS = 14 * 24 * 3600
SQS_MAX_VISIBILITY_SECONDS = 12 * 3600

# --- message attributes SNS and SQS take (emit() and the relay check them: outbox.check) --------------
# Names: both refuse these prefixes "or any casing variants" (SQS Developer Guide, message attributes).
RESERVED_ATTRIBUTE_PREFIXES = ("aws.", "amazon.")  # compared with the name in lower case
# Number values, SQS Developer Guide ("Message attribute data types"): "up to 38 digits of precision, and it
# can be between 10^-128 and 10^+126" (read as magnitudes, and 0). SNS Developer Guide ("Message attribute
# data types and validation"): "a value from -10^9 to 10^9, with 5 digits of accuracy after the decimal
# point" (its subscription filter policies match numbers within the same bounds).
SQS_NUMBER_DIGITS = 38
SQS_NUMBER_MAGNITUDES = ("1E-128", "1E+126")
SNS_NUMBER_MAGNITUDE = "1E+9"
SNS_NUMBER_DECIMALS = 5

# --- formats -------------------------------------------------------------------------------------------

# module:function, the function possibly an attribute path (module:Class.method).
PROCESSOR_PATTERN = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# A CloudWatch namespace: 1-255 of the characters CloudWatch takes (letters, digits, '.', '-', '_', '/', '#',
# space; ':' is left out), not starting with a space or with 'AWS/' (AWS services').
METRICS_NAMESPACE_PATTERN = re.compile(r"(?!AWS/)[0-9A-Za-z._/#-][0-9A-Za-z._/# -]{0,254}")
# Dotted field paths (order.id): segments separated by '.', none empty.
FIELD_PATH_SEPARATOR = "."


def field_path(text: str) -> tuple[str, ...]:
    """``"order.id"`` -> ``("order", "id")``; raises ConfigurationError for an empty path or segment."""
    if not isinstance(text, str) or not text:
        raise ConfigurationError(f"a field path must be a non-empty string; got {text!r}")
    parts = tuple(text.split(FIELD_PATH_SEPARATOR))
    if any(not part for part in parts):
        raise ConfigurationError(f"field path {text!r} has an empty segment")
    return parts


NEVER = 0  # a lifetime of 0 seconds: no TTL attribute is written, the record never expires
# The largest whole number a double holds exactly: CDK carries a Duration as one, so a longer one would
# reach the function as another number.
MAX_SECONDS = 2**53 - 1


# --- kinds: the values a setting takes, and how the environment writes them ------------------------------


def shown(value: object) -> str:
    """A value as an error message shows it: a plain value's repr, anything else with its type."""
    if isinstance(value, str | int | float | bool | type(None) | list | tuple | dict):
        return repr(value)
    return f"{type(value).__name__} {value!r}"


def _refuse(name: str, wanted: str, value: object) -> NoReturn:
    raise ConfigurationError(f"{name} must {wanted}; got {shown(value)}")


class Kind(ABC):
    """The values a setting takes: ``coerce`` checks a Python value and returns it as the runtime holds it,
    ``parse`` reads the environment's text, ``render`` writes it; errors name ``name`` and the value."""

    def parse(self, name: str, text: str) -> Any:
        return self.coerce(name, text)

    @abstractmethod
    def coerce(self, name: str, value: Any) -> Any: ...

    def render(self, value: Any) -> str:
        return str(value)


class IntRange(Kind):
    """A whole number from ``low`` to ``high`` (None: unbounded)."""

    wanted = "be an integer"
    unit = ""

    def __init__(self, low: int | None = None, high: int | None = None) -> None:
        self.low, self.high = low, high

    def parse(self, name: str, text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            _refuse(name, self.wanted, text)
        return self.coerce(name, number)

    def coerce(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            _refuse(name, self.wanted, value)
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ConfigurationError(f"{name} must be {self.limits()}; got {value}{self.unit}")
        return value

    def limits(self) -> str:
        if self.high is not None:
            return f"between {self.low} and {self.high}{self.unit}"
        if self.low is None:
            return "an integer"
        return f"at least {self.low}{self.unit.removesuffix('s') if self.low == 1 else self.unit}"


class Seconds(IntRange):
    """Whole seconds (an option's ``aws_cdk.Duration``), at most :data:`MAX_SECONDS`."""

    wanted = "be a whole number of seconds"
    unit = " seconds"

    def coerce(self, name: str, value: Any) -> int:
        seconds = super().coerce(name, value)
        if seconds > MAX_SECONDS:
            raise ConfigurationError(
                f"{name} must be at most {MAX_SECONDS} seconds (CDK carries a duration as a double); got "
                f"{seconds} seconds"
            )
        return seconds


class Lifetime(Seconds):
    """Seconds until a record expires; :data:`NEVER` (``0`` or ``never``; an option's None) keeps it."""

    wanted = f"be a whole number of seconds, {NEVER} or never (never expire)"

    def parse(self, name: str, text: str) -> int:
        return NEVER if text.strip().lower() == "never" else super().parse(name, text)


class Choice(Kind):
    """One member of a closed set, given as the member or its value (upper-cased first with ``upper``)."""

    def __init__(self, enum: type[StrEnum], upper: bool = False) -> None:
        self.enum, self.upper = enum, upper

    def coerce(self, name: str, value: Any) -> StrEnum:
        if self.upper and isinstance(value, str):
            value = value.upper()
        try:
            return self.enum(value)
        except ValueError:
            _refuse(name, f"be one of {', '.join(self.enum)}", value)

    def render(self, value: Any) -> str:
        return self.enum(value).value


class Pattern(Kind):
    """A string matching ``pattern``; ``wanted`` says what that is in words."""

    def __init__(self, pattern: re.Pattern[str], wanted: str) -> None:
        self.pattern, self.wanted = pattern, wanted

    def coerce(self, name: str, value: Any) -> str:
        if not isinstance(value, str) or not self.pattern.fullmatch(value):
            _refuse(name, self.wanted, value)
        return value


# Strings, taken as they are (no whitespace is stripped).
TEXT = Pattern(re.compile(".*", re.DOTALL), "be a string")
NAME = Pattern(re.compile(r"\s*\S.*", re.DOTALL), "be a non-empty string")
ATTRIBUTE_NAME = Pattern(
    re.compile(rf"(?!{re.escape(ATTRIBUTE_PREFIX)})\s*\S.*", re.DOTALL),
    f"be a non-empty attribute name, not beginning with {ATTRIBUTE_PREFIX!r} (the runtime's own attributes)",
)


class FieldPath(Kind):
    """A dotted path into the JSON body (``order.id``)."""

    def coerce(self, name: str, value: Any) -> str:
        try:
            field_path(value)
        except ConfigurationError as error:
            raise ConfigurationError(f"{name}: {error}") from None
        return value


class FieldPaths(Kind):
    """Dotted paths, written as a JSON array; with ``at_least_one`` never empty."""

    def __init__(self, at_least_one: bool = False) -> None:
        self.at_least_one = at_least_one

    def parse(self, name: str, text: str) -> tuple[str, ...]:
        try:
            paths = json.loads(text)
        except ValueError:
            _refuse(name, 'be a JSON array of field paths such as ["order.id", "amount"]', text)
        return self.coerce(name, paths)

    def coerce(self, name: str, value: Any) -> tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, Sequence):
            _refuse(name, "be a list of field paths", value)
        if self.at_least_one and not value:
            _refuse(name, "name at least one field (unset: the whole body)", value)
        return tuple(FieldPath().coerce(name, path) for path in value)

    def render(self, value: Any) -> str:
        return json.dumps(list(value), separators=(",", ":"))


# --- the function's environment: one declaration per setting ---------------------------------------------


class Variable(NamedTuple):
    """One setting, declared once: its variable, the values it takes, the runtime's value when it is unset
    or empty, the option that sets it at synth and when the runtime reads it (``only``). Config, the
    constructs, app.py and docs/runtime-contract.md's table all work from these."""

    name: str
    kind: Kind
    meaning: str
    default: Any = None
    option: str | None = None
    only: tuple[Any, ...] | None = None
    required: bool = False
    config_field: str | None = None

    @property
    def field(self) -> str:
        """The :class:`~idempotent_runtime.config.Config` field holding the value."""
        return self.config_field or self.name.lower()

    def parse(self, text: str) -> Any:
        return self.kind.parse(self.name, text)

    def coerce(self, value: Any) -> Any:
        return self.kind.coerce(self.name, value)

    def read_beside(self, settings: Mapping[str, Any]) -> bool:
        """Whether the runtime reads this setting beside ``settings`` (``only``: another setting's name, then
        the values under which this one is read)."""
        return self.only is None or settings.get(self.only[0]) in self.only[1:]


HANDLER = "idempotent_runtime.handler.handler"
RUNTIME_PACKAGE = "idempotent_runtime"
_MODE = "IDEMPOTENCY_MODE"
_FIELDS_ONLY = ("KEY_SOURCE", KeySource.FIELDS)
# The key sources that read body fields: KEY_SOURCE 'field' reads PARTITION_KEY_FIELD alone.
FIELD_KEY_SOURCES = frozenset({KeySource.FIELDS, KeySource.FIELD})

# In the order the constructs write them.
TABLE_NAME = Variable("TABLE_NAME", NAME, "the DynamoDB table (string partition and sort key)", required=True)
PARTITION_KEY = Variable(
    "PARTITION_KEY", ATTRIBUTE_NAME, "the table's partition key", "pk", "TableOptions.partition_key_name"
)
SORT_KEY = Variable("SORT_KEY", ATTRIBUTE_NAME, "the table's sort key", "sk", "TableOptions.sort_key_name")
TTL_ATTRIBUTE = Variable(
    "TTL_ATTRIBUTE",
    ATTRIBUTE_NAME,
    "the table's TTL (epoch seconds)",
    "expires_at",
    "TableOptions.time_to_live_attribute",
)
DEDUP_TTL_SECONDS = Variable(
    "DEDUP_TTL_SECONDS",
    Lifetime(NEVER),
    "lifetime of idempotency-only records: transaction markers, guarded claims and results, quarantine "
    "records (at least 14 days)",
    7 * 24 * 3600,
    "ConsumerOptions.dedup_ttl",
)
IDEMPOTENCY_MODE = Variable(
    _MODE,
    Choice(Mode),
    "how a message becomes one effect",
    Mode.DOCUMENT,
    "ConsumerOptions.mode",
    config_field="mode",
)
KEY_SOURCE = Variable(
    "KEY_SOURCE",
    Choice(KeySource),
    "where a record's key comes from",
    KeySource.FIELDS,
    "ConsumerOptions.key_source",
)
QUEUE_TYPE = Variable(
    "QUEUE_TYPE", Choice(QueueType), "fifo: a group's records in order; standard: each alone", QueueType.FIFO
)
ON_CONFLICT = Variable(
    "ON_CONFLICT",
    Choice(OnConflict),
    "a delivery whose key is done with another fingerprint goes to the DLQ or is a duplicate (logged)",
    OnConflict.QUARANTINE,
    "ConsumerOptions.on_conflict",
)
METRICS_NAMESPACE = Variable(
    "METRICS_NAMESPACE",
    Pattern(
        METRICS_NAMESPACE_PATTERN,
        "be 1 to 255 characters: letters, digits, spaces and '.-_/#' (no ':'), not beginning with a space "
        "or with 'AWS/' (the namespaces of AWS services)",
    ),
    "CloudWatch namespace of the Embedded Metric Format lines",
    "IdempotentPipeline",
    "ConsumerOptions.metrics_namespace",
)
DOCUMENT_TTL_SECONDS = Variable(
    "DOCUMENT_TTL_SECONDS",
    Lifetime(NEVER),
    "lifetime of the stored documents (never: duplicates are recognised while a document exists)",
    NEVER,
    "ConsumerOptions.document_ttl",
    only=(_MODE, Mode.DOCUMENT),
)
PARTITION_KEY_FIELD = Variable(
    "PARTITION_KEY_FIELD",
    FieldPath(),
    "the body field of the partition key (fields: set with SORT_KEY_FIELD, or neither; field: required)",
    "x",
    "ConsumerOptions.partition_key_field",
    only=(*_FIELDS_ONLY, KeySource.FIELD),
)
SORT_KEY_FIELD = Variable(
    "SORT_KEY_FIELD",
    FieldPath(),
    "the body field of the sort key (set with PARTITION_KEY_FIELD, or neither)",
    "y",
    "ConsumerOptions.sort_key_field",
    only=_FIELDS_ONLY,
)
KEY_PREFIX = Variable(
    "KEY_PREFIX",
    TEXT,
    "prepended to every partition key (pipelines sharing a table)",
    "",
    "ConsumerOptions.key_prefix",
)
FINGERPRINT_FIELDS = Variable(
    "FINGERPRINT_FIELDS",
    FieldPaths(at_least_one=True),
    "the payload fingerprint covers only these fields (unset: the whole body)",
    option="ConsumerOptions.fingerprint_fields",
)
FINGERPRINT_EXCLUDE = Variable(
    "FINGERPRINT_EXCLUDE",
    FieldPaths(),
    "the payload fingerprint covers the body without these fields",
    option="ConsumerOptions.fingerprint_exclude",
)
PROCESSOR = Variable(
    "PROCESSOR",
    Pattern(PROCESSOR_PATTERN, "look like 'module:function' (e.g. 'orders:handle')"),
    "your function, from the asset's root; required by transaction and guarded",
    option="ConsumerOptions.processor",
)
DLQ_URL = Variable(
    "DLQ_URL",
    Pattern(re.compile(r"https?://\S+"), "be an sqs queue url (https://...)"),
    "permanent failures go there at once, with their reason (unset: through redrive)",
)
LEASE_SECONDS = Variable(
    "LEASE_SECONDS",
    Seconds(1),
    "how long the owner uses a claim (unset: the invocation's remaining time)",
    option="ConsumerOptions.lease_duration",
    only=(_MODE, Mode.GUARDED),
)
LEASE_MARGIN_SECONDS = Variable(
    "LEASE_MARGIN_SECONDS",
    Seconds(0),
    "a claim is recorded as held this much longer than its owner uses it (clocks running ahead elsewhere)",
    10,
    "ConsumerOptions.lease_margin",
    only=(_MODE, Mode.GUARDED),
)
# -- versioned mode: the latest state per entity ---------------------------------------------------------
VERSION_FIELD = Variable(
    "VERSION_FIELD",
    FieldPath(),
    "the body field of each message's version: a number, or an RFC 3339 timestamp with its UTC offset; "
    "required",
    option="ConsumerOptions.version_field",
    only=(_MODE, Mode.VERSIONED),
)
TOMBSTONE_TTL_SECONDS = Variable(
    "TOMBSTONE_TTL_SECONDS",
    Lifetime(NEVER),
    "lifetime of a deleted entity's tombstone (never: an older version of it stays stale for good)",
    NEVER,
    "ConsumerOptions.tombstone_ttl",
    only=(_MODE, Mode.VERSIONED),
)
# -------------------------------------------------------------------------------------------------------
MAX_WORKERS = Variable(
    "MAX_WORKERS",
    IntRange(1, 64),
    "threads for the message groups of a batch",
    10,
    "ConsumerOptions.max_workers",
)
LOG_LEVEL = Variable(
    "LOG_LEVEL",
    Choice(LogLevel, upper=True),
    "DEBUG: a line per record",
    LogLevel.INFO,
    "ConsumerOptions.log_level",
)
MAX_RECEIVE_COUNT = Variable(
    "MAX_RECEIVE_COUNT",
    IntRange(1, 1000),
    "the queue's maxReceiveCount: a record failing on its last receive goes to DLQ_URL with its reason",
    option="MessagingOptions.max_receive_count",
)

# --- emitting: the outbox and its relay ------------------------------------------------------------------
# message.emit(...) in transaction and guarded mode: the emitted messages are written as outbox items in the
# transaction that commits the effect, and the relay, a function on the table's stream, publishes them to
# EMIT_TARGET_ARN. The outbox's layout is in idempotent_runtime.outbox, the relay's in
# idempotent_runtime.relay (neither ships with a consumer that does not emit).

EMIT_TARGET_ARN = Variable(
    "EMIT_TARGET_ARN",
    Pattern(
        re.compile(r"arn:[\w-]+:(sns|sqs):[\w-]+:\d{12}:[\w-]{1,256}(\.fifo)?"),
        "be the arn of an sns topic or an sqs queue",
    ),
    "where message.emit() sends, through the outbox and the relay (FIFO when the name ends in .fifo); the "
    "relay's too",
)
# Modes whose processors may emit: their effect commits in one transaction, which holds the outbox items.
EMITTING_MODES = frozenset({Mode.TRANSACTION, Mode.GUARDED})

ENVIRONMENT: tuple[Variable, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Variable))
# The runtime's own variables: a construct's `environment` prop may not set them.
VARIABLE_NAMES = frozenset(variable.name for variable in ENVIRONMENT)
# Variables of 0.1 that no longer exist, and what replaced them: the runtime refuses to start when one is
# set (a silently ignored lifetime would change what expires), the constructs refuse them in `environment`.
RETIRED_VARIABLES: dict[str, str] = {
    "TTL_SECONDS": (
        "TTL_SECONDS was split in two: DEDUP_TTL_SECONDS (transaction markers, guarded records, quarantine "
        "records; default 604800 = 7 days) and DOCUMENT_TTL_SECONDS (document mode's documents; default 0 = "
        "never expire)"
    ),
}


def recognising_lifetime(mode: Mode) -> Variable:
    """The lifetime of what ``mode`` recognises a repeated message by: a document's; in versioned mode a
    tombstone's (a state never expires; an older version of a deleted entity is stale while its tombstone
    lasts); else the idempotency records'."""
    return {Mode.DOCUMENT: DOCUMENT_TTL_SECONDS, Mode.VERSIONED: TOMBSTONE_TTL_SECONDS}.get(
        mode, DEDUP_TTL_SECONDS
    )


# KEY_SOURCE 'fields' reads two body fields, a pair: neither set reads the placeholders x and y (the
# declarations' defaults, kept for the apps built on them), one set without the other is refused
# (SETTINGS_RULES), never completed by a placeholder no body holds. 'field' reads one field, no default.
KEY_FIELDS = (PARTITION_KEY_FIELD, SORT_KEY_FIELD)


def key_fields(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The key fields beside ``settings`` (by variable name; None: unset): the placeholders when KEY_SOURCE
    is 'fields' and neither is set, else as they are."""
    given = {variable.name: settings.get(variable.name) for variable in KEY_FIELDS}
    if settings.get(KEY_SOURCE.name) == KeySource.FIELDS and set(given.values()) == {None}:
        return {variable.name: variable.default for variable in KEY_FIELDS}
    return given


# --- settings that cannot work together ------------------------------------------------------------------


@dataclass(frozen=True)
class SettingsRule:
    """Settings under which messages would fail, all the same way: refused at synth and at cold start.
    ``broken`` takes the resolved values of ``settings`` (variable names). In ``message`` each side writes
    its own names: ``{n[KEY_PREFIX]}`` is KEY_PREFIX or ConsumerOptions.key_prefix; ``{v[KEY_PREFIX]}``
    the value's repr. With ``presence`` the rule asks only whether settings are set, so a deploy-time value
    counts as set (any other rule reading one is skipped)."""

    settings: tuple[str, ...]
    broken: Callable[..., bool]
    message: str
    presence: bool = False


class _Names(dict):
    def __init__(self, name_of: Callable[[str], str]) -> None:
        self.name_of = name_of

    def __missing__(self, name: str) -> str:
        return self.name_of(name)


class _Shown(dict):
    def __getitem__(self, name: str) -> str:
        value = super().__getitem__(name)
        return repr(value.value if isinstance(value, StrEnum) else value)


def _too_long(prefix: str) -> bool:
    try:
        return len(prefix.encode()) > MAX_KEY_PREFIX_BYTES
    except UnicodeEncodeError:  # a lone surrogate: no key could be written
        return True


# Modes whose record is the message's document (the body, or what the processor returns): the processor is
# optional, and the document's field names meet the table's attribute names.
STORING_MODES = frozenset({Mode.DOCUMENT, Mode.VERSIONED})


def _stores_fields(mode: Any, source: Any) -> bool:
    return mode in STORING_MODES and source in FIELD_KEY_SOURCES


# Half the partition key stays for the key's own value.
MAX_KEY_PREFIX_BYTES = MAX_PARTITION_KEY_BYTES // 2
# The body fields a storing mode reads, each with the table attribute that may hold its very value.
_FIELDS = {"PARTITION_KEY_FIELD": "PARTITION_KEY", "SORT_KEY_FIELD": "SORT_KEY", "VERSION_FIELD": None}
_HOLDS = {
    "PARTITION_KEY": ("partition key", "the key's prefixed partition value"),
    "SORT_KEY": ("sort key", "the key's sort value"),
    "TTL_ATTRIBUTE": ("TTL", "the document's expiry"),
}
_DOCUMENT = "in {n[IDEMPOTENCY_MODE]} {v[IDEMPOTENCY_MODE]}"


def nested(first: Any, second: Any) -> bool:
    """Whether one of two dotted field paths lies inside the other (``order`` and ``order.id``): no body holds
    a value at both that a key or a version can be (a string, number or boolean, never an object)."""
    if not isinstance(first, str) or not isinstance(second, str) or first == second:
        return False
    a, b = first.split(FIELD_PATH_SEPARATOR), second.split(FIELD_PATH_SEPARATOR)
    shorter, longer = sorted((a, b), key=len)
    return longer[: len(shorter)] == shorter


# The pairs of body fields one message must hold at once, each with when the runtime reads both.
_READ_TOGETHER = (
    ("PARTITION_KEY_FIELD", "SORT_KEY_FIELD", lambda mode, source: source == KeySource.FIELDS),
    ("VERSION_FIELD", "PARTITION_KEY_FIELD", lambda mode, source: mode == Mode.VERSIONED),
    ("VERSION_FIELD", "SORT_KEY_FIELD", lambda mode, source: mode == Mode.VERSIONED),
)
_MODE_SOURCE = ("IDEMPOTENCY_MODE", "KEY_SOURCE")

SETTINGS_RULES: tuple[SettingsRule, ...] = (
    SettingsRule(
        ("PARTITION_KEY", "SORT_KEY", "TTL_ATTRIBUTE"),
        lambda *names: len(set(names)) != len(names),
        "{n[PARTITION_KEY]}, {n[SORT_KEY]} and {n[TTL_ATTRIBUTE]} must be three different attribute names; "
        "got {v[PARTITION_KEY]}, {v[SORT_KEY]}, {v[TTL_ATTRIBUTE]}",
    ),
    SettingsRule(
        ("KEY_SOURCE", "PARTITION_KEY_FIELD", "SORT_KEY_FIELD"),
        lambda source, partition, sort: source == KeySource.FIELDS and (partition is None) != (sort is None),
        "{n[PARTITION_KEY_FIELD]} and {n[SORT_KEY_FIELD]} must be set together ({n[KEY_SOURCE]} 'fields' "
        "reads both from every body, and no body holds a placeholder's field): got {n[PARTITION_KEY_FIELD]} "
        "{v[PARTITION_KEY_FIELD]} and {n[SORT_KEY_FIELD]} {v[SORT_KEY_FIELD]}; set the other one too, or key "
        "each message by one field with {n[KEY_SOURCE]} 'field' and {n[PARTITION_KEY_FIELD]} alone",
        presence=True,
    ),
    SettingsRule(
        ("KEY_SOURCE", "PARTITION_KEY_FIELD"),
        lambda source, partition: source == KeySource.FIELD and partition is None,
        "{n[KEY_SOURCE]} 'field' keys each message by one body field: {n[PARTITION_KEY_FIELD]} names it "
        "(e.g. 'id') and is required",
        presence=True,
    ),
    SettingsRule(
        ("KEY_SOURCE", "SORT_KEY_FIELD"),
        lambda source, sort: source == KeySource.FIELD and sort is not None,
        "{n[SORT_KEY_FIELD]} applies only to {n[KEY_SOURCE]} 'fields'; got {n[KEY_SOURCE]} 'field' (one "
        "field: the sort key holds its path) with {n[SORT_KEY_FIELD]} {v[SORT_KEY_FIELD]}; for a key of two "
        "fields use {n[KEY_SOURCE]} 'fields'",
        presence=True,
    ),
    SettingsRule(
        ("KEY_SOURCE", "FINGERPRINT_FIELDS", "FINGERPRINT_EXCLUDE"),
        lambda source, *chosen: source == KeySource.BODY_SHA256 and chosen != (None, None),
        "{n[FINGERPRINT_FIELDS]} and {n[FINGERPRINT_EXCLUDE]} do nothing with {n[KEY_SOURCE]} 'body_sha256': "
        "the key is the whole body's hash, so a resend that differs anywhere is a new key (and a second "
        "effect), never a duplicate; got {n[FINGERPRINT_FIELDS]} {v[FINGERPRINT_FIELDS]} and "
        "{n[FINGERPRINT_EXCLUDE]} {v[FINGERPRINT_EXCLUDE]}: key by fields, or drop them",
        presence=True,
    ),
    SettingsRule(
        ("KEY_SOURCE", "QUEUE_TYPE"),
        lambda source, queue: source in FIFO_ONLY_KEY_SOURCES and queue != QueueType.FIFO,
        "{n[KEY_SOURCE]} {v[KEY_SOURCE]} needs a FIFO queue (a standard queue's messages carry no "
        "MessageDeduplicationId); got {n[QUEUE_TYPE]} {v[QUEUE_TYPE]}",
    ),
    SettingsRule(
        ("IDEMPOTENCY_MODE", "PROCESSOR"),
        lambda mode, processor: mode not in STORING_MODES and processor is None,
        "{n[PROCESSOR]} is required with {n[IDEMPOTENCY_MODE]} {v[IDEMPOTENCY_MODE]}",
    ),
    SettingsRule(
        ("KEY_PREFIX",),
        lambda prefix: prefix.startswith(RESERVED_KEY_PREFIX),
        f"{{n[KEY_PREFIX]}} must not begin with {RESERVED_KEY_PREFIX!r} (the runtime's own keys); got "
        "{v[KEY_PREFIX]}",
    ),
    SettingsRule(
        ("KEY_PREFIX",),
        _too_long,
        f"{{n[KEY_PREFIX]}} must be at most {MAX_KEY_PREFIX_BYTES} bytes of UTF-8; got {{v[KEY_PREFIX]:.99}}",
    ),
    SettingsRule(
        ("IDEMPOTENCY_MODE", "EMIT_TARGET_ARN"),
        lambda mode, target: target is not None and mode not in EMITTING_MODES,
        "{n[EMIT_TARGET_ARN]} needs {n[IDEMPOTENCY_MODE]} 'transaction' or 'guarded', which commit the "
        "emitted messages with the effect; got {n[IDEMPOTENCY_MODE]} {v[IDEMPOTENCY_MODE]}",
    ),
    SettingsRule(
        ("FINGERPRINT_FIELDS", "FINGERPRINT_EXCLUDE"),
        lambda fields, excluded: fields is not None and excluded is not None,
        "{n[FINGERPRINT_FIELDS]} and {n[FINGERPRINT_EXCLUDE]} cannot both be set; got "
        "{v[FINGERPRINT_FIELDS]} and {v[FINGERPRINT_EXCLUDE]}",
    ),
    # -- versioned mode --------------------------------------------------------------------------------
    SettingsRule(
        ("IDEMPOTENCY_MODE", "VERSION_FIELD"),
        lambda mode, field: mode == Mode.VERSIONED and field is None,
        "{n[VERSION_FIELD]} is required with {n[IDEMPOTENCY_MODE]} 'versioned': the body field that holds "
        "each message's version",
    ),
    SettingsRule(
        ("IDEMPOTENCY_MODE", "VERSION_FIELD"),
        lambda mode, field: mode != Mode.VERSIONED and field is not None,
        "{n[VERSION_FIELD]} applies only to {n[IDEMPOTENCY_MODE]} 'versioned'; got {n[IDEMPOTENCY_MODE]} "
        "{v[IDEMPOTENCY_MODE]} with {n[VERSION_FIELD]} {v[VERSION_FIELD]}",
    ),
    SettingsRule(
        _MODE_SOURCE,
        lambda mode, source: mode == Mode.VERSIONED and source not in FIELD_KEY_SOURCES,
        "{n[KEY_SOURCE]} {v[KEY_SOURCE]} cannot be used with {n[IDEMPOTENCY_MODE]} 'versioned': a key from "
        "a message's ids or content makes every version an entity of its own, never compared with another; "
        "key the entity by its body fields ({n[KEY_SOURCE]} 'fields' or 'field')",
    ),
    SettingsRule(
        ("IDEMPOTENCY_MODE", "VERSION_FIELD", "PARTITION_KEY_FIELD", "SORT_KEY_FIELD"),
        lambda mode, version, *keys: mode == Mode.VERSIONED and version in keys,
        "{n[VERSION_FIELD]} {v[VERSION_FIELD]} is one of the key fields ({n[PARTITION_KEY_FIELD]} "
        "{v[PARTITION_KEY_FIELD]}, {n[SORT_KEY_FIELD]} {v[SORT_KEY_FIELD]}): every version would be an "
        "entity of its own; the version is another field of the entity's body",
    ),
    # ---------------------------------------------------------------------------------------------------
    *(
        SettingsRule(
            (*_MODE_SOURCE, first, second),
            lambda mode, source, a, b, read=read: read(mode, source) and nested(a, b),
            f"{{n[{first}]}} {{v[{first}]}} and {{n[{second}]}} {{v[{second}]}}: one field lies inside the "
            "other, so no body holds both (a key or a version is a string, number or boolean, not an object) "
            "and every message would be refused; name two separate fields",
        )
        for first, second, read in _READ_TOGETHER
    ),
    SettingsRule(
        (*_MODE_SOURCE, "KEY_PREFIX", "PARTITION_KEY_FIELD", "PARTITION_KEY"),
        lambda mode, source, prefix, field, name: _stores_fields(mode, source) and prefix and field == name,
        "{n[KEY_PREFIX]} {v[KEY_PREFIX]} cannot be used with {n[PARTITION_KEY_FIELD]} "
        f"{{v[PARTITION_KEY_FIELD]}} {_DOCUMENT}: the field is the table's partition key attribute "
        "({n[PARTITION_KEY]}), which holds the prefix + its value, so every message would be refused; "
        "rename the table's partition key (e.g. 'pk') or drop the prefix",
    ),
    *(
        SettingsRule(
            (*_MODE_SOURCE, field, attribute),
            lambda mode, source, path, name, own=own == attribute: (
                _stores_fields(mode, source)
                and isinstance(path, str)
                and path.split(FIELD_PATH_SEPARATOR)[0] == name
                and (not own or path != name)
            ),
            f"{{n[{field}]}} {{v[{field}]}} begins with {{v[{attribute}]}}, the table's {role} attribute "
            f"({{n[{attribute}]}}): {_DOCUMENT} it holds {what}, so messages would be refused for another "
            "value there; name the table's attributes apart from the message's fields",
        )
        for field, own in _FIELDS.items()
        for attribute, (role, what) in _HOLDS.items()
    ),
    *(
        SettingsRule(
            (*_MODE_SOURCE, field),
            lambda mode, source, path: (
                _stores_fields(mode, source) and isinstance(path, str) and path.startswith(ATTRIBUTE_PREFIX)
            ),
            f"{{n[{field}]}} {{v[{field}]}} begins with {ATTRIBUTE_PREFIX!r}, the runtime's attribute "
            f"names: {_DOCUMENT} every message would be refused",
        )
        for field in _FIELDS
    ),
)


def check_settings(
    values: Mapping[str, Any], name_of: Callable[[str], str] = str, unknown: Any = ...
) -> None:
    """Raise ConfigurationError with the first broken :data:`SETTINGS_RULES` message, each setting named by
    ``name_of`` (default: the variable). ``values``: resolved values by variable name; a rule reading one
    that is missing or ``unknown`` (a deploy-time value) is skipped."""
    for rule in SETTINGS_RULES:
        args = [values.get(name, unknown) for name in rule.settings]
        if (rule.presence or unknown not in args) and rule.broken(*args):
            raise ConfigurationError(rule.message.format(n=_Names(name_of), v=_Shown(values)))
