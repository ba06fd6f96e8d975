"""The contract between the constructs and the runtime: every name, default, closed set and limit, once.

The runtime imports this module inside the Lambda; the constructs import it at synth time to write the
function's environment, grant IAM actions and check props. Standard library only, and nothing here does
I/O. ``docs/runtime-contract.md`` is the prose form of this module (a test keeps them in step).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ConfigurationError(ValueError):
    """A configuration that cannot work: raised by the constructs at synth time (naming the prop and the
    value received) and by the runtime at cold start (naming the environment variable)."""


# --- closed sets -----------------------------------------------------------------------------------------


class Mode(StrEnum):
    """How a message becomes exactly one effect."""

    DOCUMENT = "document"  # one conditional PutItem of the document the message describes
    TRANSACTION = "transaction"  # the processor's writes and a marker in one TransactWriteItems
    GUARDED = "guarded"  # effects outside DynamoDB behind a fenced lease


class KeySource(StrEnum):
    """Where a record's idempotency key comes from."""

    FIELDS = "fields"  # two body fields (dotted paths)
    DEDUP_ID = "dedup_id"  # the SQS MessageDeduplicationId (FIFO only)
    MESSAGE_ID = "message_id"  # the SQS messageId
    BODY_SHA256 = "body_sha256"  # a SHA-256 of the raw body


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
    """The one final outcome of a record in an invocation; the four add up to the batch size."""

    PROCESSED = "processed"  # this invocation applied the effect
    DUPLICATE = "duplicate"  # the key was already done with the same payload (or conflicts are duplicates)
    QUARANTINED = "quarantined"  # sent to the DLQ with a reason; deleted from the source queue
    FAILED = "failed"  # reported as a batch item failure: SQS delivers it again


class Metric(StrEnum):
    """The Embedded Metric Format counters of one batch (unit Count, dimension FunctionName).

    The first four count outcomes and add up to the batch size; ``conflicts`` and ``misconfigured`` count
    records that also have one of those outcomes (a conflict is quarantined or a duplicate, a record failed
    because of the deployment is failed).
    """

    PROCESSED = "processed"
    DUPLICATES = "duplicates"
    QUARANTINED = "quarantined"
    FAILED = "failed"
    CONFLICTS = "conflicts"
    MISCONFIGURED = "misconfigured"


OUTCOME_METRIC = {
    Outcome.PROCESSED: Metric.PROCESSED,
    Outcome.DUPLICATE: Metric.DUPLICATES,
    Outcome.QUARANTINED: Metric.QUARANTINED,
    Outcome.FAILED: Metric.FAILED,
}
# The one dimension of every metric: the runtime writes the function's name under it, the constructs' alarms
# and dashboard read it.
METRICS_DIMENSION = "FunctionName"


class DeadLetterKind(StrEnum):
    """Why the runtime sent a message to the DLQ (``kind`` in :data:`DLQ_DETAILS_ATTRIBUTE`)."""

    INVALID = "invalid"  # the runtime cannot key or store it (bad JSON, missing key, number out of range...)
    REJECTED = "rejected"  # the processor raised PermanentError, or its own transaction condition failed
    CONFLICT = "conflict"  # the key is done with a different payload fingerprint
    EXHAUSTED = "exhausted"  # failed on its last receive (MAX_RECEIVE_COUNT): SQS would redrive it now


# --- the function's environment ------------------------------------------------------------------------


@dataclass(frozen=True)
class Variable:
    """One environment variable of the consumer function. ``default`` is the text the runtime assumes
    when the variable is unset or empty (None: no default)."""

    name: str
    default: str | None
    meaning: str
    required: bool = False


HANDLER = "idempotent_runtime.handler.handler"
RUNTIME_PACKAGE = "idempotent_runtime"

DEFAULT_PARTITION_KEY = "pk"
DEFAULT_SORT_KEY = "sk"
DEFAULT_TTL_ATTRIBUTE = "expires_at"
DEFAULT_PARTITION_KEY_FIELD = "x"
DEFAULT_SORT_KEY_FIELD = "y"
DEFAULT_DEDUP_TTL_SECONDS = 7 * 24 * 3600
DEFAULT_DOCUMENT_TTL_SECONDS = 0  # documents never expire unless asked
DEFAULT_LEASE_MARGIN_SECONDS = 10
DEFAULT_MAX_WORKERS = 10
DEFAULT_METRICS_NAMESPACE = "IdempotentPipeline"
NEVER = 0  # a TTL of 0 seconds: no TTL attribute is written, the record never expires

TABLE_NAME = Variable("TABLE_NAME", None, "the DynamoDB table (string partition + sort key)", required=True)
PARTITION_KEY = Variable("PARTITION_KEY", DEFAULT_PARTITION_KEY, "the table's partition key attribute")
SORT_KEY = Variable("SORT_KEY", DEFAULT_SORT_KEY, "the table's sort key attribute")
TTL_ATTRIBUTE = Variable("TTL_ATTRIBUTE", DEFAULT_TTL_ATTRIBUTE, "the table's TTL attribute (epoch seconds)")
DEDUP_TTL_SECONDS = Variable(
    "DEDUP_TTL_SECONDS",
    str(DEFAULT_DEDUP_TTL_SECONDS),
    "lifetime of the records that exist only for idempotency (transaction markers, guarded claims and "
    "results, quarantine records); 0 = never expire",
)
DOCUMENT_TTL_SECONDS = Variable(
    "DOCUMENT_TTL_SECONDS",
    str(DEFAULT_DOCUMENT_TTL_SECONDS),
    "document mode: lifetime of the stored documents; 0 = never expire (duplicates are then recognised for "
    "as long as the document exists)",
)
IDEMPOTENCY_MODE = Variable("IDEMPOTENCY_MODE", Mode.DOCUMENT.value, "document, transaction or guarded")
KEY_SOURCE = Variable("KEY_SOURCE", KeySource.FIELDS.value, "fields, dedup_id, message_id or body_sha256")
PARTITION_KEY_FIELD = Variable(
    "PARTITION_KEY_FIELD",
    DEFAULT_PARTITION_KEY_FIELD,
    "with KEY_SOURCE=fields: the body field (a dotted path such as order.id) that becomes the partition key",
)
SORT_KEY_FIELD = Variable(
    "SORT_KEY_FIELD",
    DEFAULT_SORT_KEY_FIELD,
    "with KEY_SOURCE=fields: the body field (a dotted path) that becomes the sort key",
)
KEY_PREFIX = Variable(
    "KEY_PREFIX", "", "prepended to every partition key value, so several pipelines can share one table"
)
FINGERPRINT_FIELDS = Variable(
    "FINGERPRINT_FIELDS",
    None,
    "JSON array of dotted paths: the payload fingerprint covers only these fields (default: the whole body)",
)
FINGERPRINT_EXCLUDE = Variable(
    "FINGERPRINT_EXCLUDE",
    None,
    "JSON array of dotted paths: the payload fingerprint covers the body without these fields",
)
ON_CONFLICT = Variable(
    "ON_CONFLICT", OnConflict.QUARANTINE.value, "quarantine or duplicate: what a conflicting delivery becomes"
)
PROCESSOR = Variable("PROCESSOR", None, "your function, module:function (required for transaction, guarded)")
DLQ_URL = Variable("DLQ_URL", None, "the dead-letter queue: permanent failures are sent here at once")
MAX_RECEIVE_COUNT = Variable(
    "MAX_RECEIVE_COUNT",
    None,
    "the source queue's maxReceiveCount: a record that fails on its last receive is sent to DLQ_URL with "
    "the reason instead of being moved by SQS without one",
)
QUEUE_TYPE = Variable("QUEUE_TYPE", QueueType.FIFO.value, "fifo (groups in order) or standard (unordered)")
LEASE_SECONDS = Variable(
    "LEASE_SECONDS", None, "guarded: how long a claim is held (default: the invocation's remaining time)"
)
LEASE_MARGIN_SECONDS = Variable(
    "LEASE_MARGIN_SECONDS",
    str(DEFAULT_LEASE_MARGIN_SECONDS),
    "guarded: a claim is recorded as held this much longer than its owner uses it, so a clock that runs "
    "ahead elsewhere cannot take over a live claim",
)
MAX_WORKERS = Variable(
    "MAX_WORKERS", str(DEFAULT_MAX_WORKERS), "threads that run different message groups of a batch"
)
METRICS_NAMESPACE = Variable(
    "METRICS_NAMESPACE", DEFAULT_METRICS_NAMESPACE, "CloudWatch namespace of the Embedded Metric Format lines"
)
LOG_LEVEL = Variable("LOG_LEVEL", LogLevel.INFO.value, "DEBUG, INFO, WARNING or ERROR")

ENVIRONMENT: tuple[Variable, ...] = (
    TABLE_NAME,
    PARTITION_KEY,
    SORT_KEY,
    TTL_ATTRIBUTE,
    DEDUP_TTL_SECONDS,
    DOCUMENT_TTL_SECONDS,
    IDEMPOTENCY_MODE,
    KEY_SOURCE,
    PARTITION_KEY_FIELD,
    SORT_KEY_FIELD,
    KEY_PREFIX,
    FINGERPRINT_FIELDS,
    FINGERPRINT_EXCLUDE,
    ON_CONFLICT,
    PROCESSOR,
    DLQ_URL,
    MAX_RECEIVE_COUNT,
    QUEUE_TYPE,
    LEASE_SECONDS,
    LEASE_MARGIN_SECONDS,
    MAX_WORKERS,
    METRICS_NAMESPACE,
    LOG_LEVEL,
)
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

# --- IAM: the actions the runtime uses -----------------------------------------------------------------

TABLE_ACTIONS: dict[Mode, tuple[str, ...]] = {
    Mode.DOCUMENT: ("dynamodb:PutItem",),
    Mode.GUARDED: ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
    Mode.TRANSACTION: (
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ),
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
REASON_ATTRIBUTE = ATTRIBUTE_PREFIX + "reason"


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
FIFO_MAX_BATCH_SIZE = 10
STANDARD_MAX_BATCH_SIZE = 10_000
MAX_RECEIVE_COUNT_RANGE = (1, 1000)
MAX_WORKERS_RANGE = (1, 64)
TIMEOUT_SECONDS_RANGE = (1, 900)
MEMORY_SIZE_RANGE = (128, 10240)
MAX_CONCURRENCY_RANGE = (2, 1000)
SQS_MAX_RETENTION_SECONDS = 14 * 24 * 3600
SQS_MAX_VISIBILITY_SECONDS = 12 * 3600

# --- formats -------------------------------------------------------------------------------------------

# module:function, the function possibly an attribute path (module:Class.method).
PROCESSOR_PATTERN = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
# A CloudWatch namespace: 1-255 characters, no ':', not starting with a space or with 'AWS/' (AWS services').
METRICS_NAMESPACE_PATTERN = re.compile(r"^(?!AWS/)[^:\s][^:]{0,254}$")
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


# --- settings that cannot work together ------------------------------------------------------------------


@dataclass(frozen=True)
class SettingsRule:
    """Settings under which messages would fail, all the same way: refused at synth and at cold start.
    ``broken`` takes the resolved values of ``settings`` (variable names). In ``message`` each side writes
    its own names: ``{n[KEY_PREFIX]}`` is KEY_PREFIX or ConsumerOptions.key_prefix; ``{v[KEY_PREFIX]}``
    the value's repr."""

    settings: tuple[str, ...]
    broken: Callable[..., bool]
    message: str


class _Names(dict):
    def __missing__(self, name: str) -> str:
        return name


class _Shown(dict):
    def __getitem__(self, name: str) -> str:
        value = super().__getitem__(name)
        return repr(value.value if isinstance(value, StrEnum) else value)


def _too_long(prefix: str) -> bool:
    try:
        return len(prefix.encode()) > MAX_KEY_PREFIX_BYTES
    except UnicodeEncodeError:  # a lone surrogate: no key could be written
        return True


def _document(mode: Any, source: Any) -> bool:
    return mode == Mode.DOCUMENT and source == KeySource.FIELDS


# Half the partition key stays for the key's own value.
MAX_KEY_PREFIX_BYTES = MAX_PARTITION_KEY_BYTES // 2
_FIELDS = {"PARTITION_KEY_FIELD": "PARTITION_KEY", "SORT_KEY_FIELD": "SORT_KEY"}
_HOLDS = {
    "PARTITION_KEY": ("partition key", "the key's prefixed partition value"),
    "SORT_KEY": ("sort key", "the key's sort value"),
    "TTL_ATTRIBUTE": ("TTL", "the document's expiry"),
}
_DOCUMENT = "in {n[IDEMPOTENCY_MODE]} 'document'"
_MODE_SOURCE = ("IDEMPOTENCY_MODE", "KEY_SOURCE")

SETTINGS_RULES: tuple[SettingsRule, ...] = (
    SettingsRule(
        ("KEY_SOURCE", "QUEUE_TYPE"),
        lambda source, queue: source in FIFO_ONLY_KEY_SOURCES and queue != QueueType.FIFO,
        "{n[KEY_SOURCE]} {v[KEY_SOURCE]} needs a FIFO queue (a standard queue's messages carry no "
        "MessageDeduplicationId); got {n[QUEUE_TYPE]} {v[QUEUE_TYPE]}",
    ),
    SettingsRule(
        ("IDEMPOTENCY_MODE", "PROCESSOR"),
        lambda mode, processor: mode != Mode.DOCUMENT and processor is None,
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
        ("FINGERPRINT_FIELDS", "FINGERPRINT_EXCLUDE"),
        lambda fields, excluded: fields is not None and excluded is not None,
        "{n[FINGERPRINT_FIELDS]} and {n[FINGERPRINT_EXCLUDE]} cannot both be set; got "
        "{v[FINGERPRINT_FIELDS]} and {v[FINGERPRINT_EXCLUDE]}",
    ),
    SettingsRule(
        (*_MODE_SOURCE, "KEY_PREFIX", "PARTITION_KEY_FIELD", "PARTITION_KEY"),
        lambda mode, source, prefix, field, name: _document(mode, source) and prefix and field == name,
        "{n[KEY_PREFIX]} {v[KEY_PREFIX]} cannot be used with {n[PARTITION_KEY_FIELD]} "
        f"{{v[PARTITION_KEY_FIELD]}} {_DOCUMENT}: the field is the table's partition key attribute "
        "({n[PARTITION_KEY]}), which holds the prefix + its value, so every message would be refused; "
        "rename the table's partition key (e.g. 'pk') or drop the prefix",
    ),
    *(
        SettingsRule(
            (*_MODE_SOURCE, field, attribute),
            lambda mode, source, path, name, own=own == attribute: (
                _document(mode, source)
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
            lambda mode, source, path: _document(mode, source) and path.startswith(ATTRIBUTE_PREFIX),
            f"{{n[{field}]}} {{v[{field}]}} begins with {ATTRIBUTE_PREFIX!r}, the runtime's attribute "
            f"names: {_DOCUMENT} every message would be refused",
        )
        for field in _FIELDS
    ),
)


def check_settings(
    values: Mapping[str, Any], names: Mapping[str, Any] | None = None, unknown: Any = ...
) -> None:
    """Raise ConfigurationError with the first broken :data:`SETTINGS_RULES` message in ``names`` (default:
    the variables). ``values``: resolved values by variable name; a rule reading one that is missing or
    ``unknown`` (a deploy-time value) is skipped."""
    for rule in SETTINGS_RULES:
        args = [values.get(name, unknown) for name in rule.settings]
        if unknown not in args and rule.broken(*args):
            raise ConfigurationError(rule.message.format(n=_Names(names or {}), v=_Shown(values)))
