"""Start a Lambda durable function's execution exactly once per message key, from a guarded-mode processor -
the dispatcher AWS tells users to put in front of a durable function (event source mappings do not name
executions: every SQS delivery, retries included, would start a new one)::

    from idempotent_runtime.durable import start_durable_execution_once

    def start_fulfilment(message):
        return start_durable_execution_once(
            message, os.environ["DURABLE_FUNCTION_ARN"], message.json_object()
        )

The same mechanism as :func:`idempotent_runtime.workflows.start_execution_once`: the execution's name is the
key's (:func:`durable_execution_name`, ≤ 64 characters), so Lambda itself returns the existing execution -
running or closed, within the function's retention - to a re-run after a crash between the invocation and
the key's completion, or to a delivery after the key's record expired; another payload for the key is a
conflict (:class:`~idempotent_runtime.workflows.ExecutionConflict`). docs/runtime.md, "Start a durable
function exactly once".

Importing this module (at cold start, when the processor's module imports it) checks that the runtime's SDK
can name an execution (botocore from 1.42.1): if not, one ERROR line says so, and every start is a
misconfiguration - retried, never quarantined - until boto3 is bundled with the function.

Not part of the function's code asset unless your code names it.
"""

from __future__ import annotations

from typing import Any

from idempotent_runtime.message import Key, Message
from idempotent_runtime.observability import cold_start_error
from idempotent_runtime.workflows import DURABLE_FUNCTIONS, sdk_gap

__all__ = ["durable_execution_name", "start_durable_execution_once"]


def durable_execution_name(key: Key) -> str:
    """The durable execution name of ``key``: ``partition_sort`` when both hold only ASCII letters, digits
    and ``-`` and it is ≤ 64 characters, else the SHA-256 (hex) of the key. Always a name Lambda accepts."""
    return DURABLE_FUNCTIONS.name(key)


def start_durable_execution_once(message: Message, function: str, payload: Any, *, client: Any = None) -> str:
    """Invoke ``function`` - a durable function's version or alias (its ARN, or ``NAME:QUALIFIER``) -
    asynchronously with ``payload`` (a JSON value built from the message alone) under the key's
    :func:`durable_execution_name`, once; returns the durable execution's ARN - of the execution started
    now, or of the one an earlier run started with the same payload, running or closed.

    Raises :class:`~idempotent_runtime.workflows.ExecutionConflict` when that execution has another payload,
    ``TransientError`` on throttling (after retries within the invocation), ``Misconfiguration`` (retried,
    never quarantined) for an SDK that cannot name executions, an unqualified, missing or non-durable
    function or missing permissions, ``PermanentError`` for a payload Lambda refuses (over 1 MB). ``client``:
    a ``lambda`` client (default: one per execution environment, with the runtime's settings).
    """
    return DURABLE_FUNCTIONS.start_once(message, function, payload, client)


def _check_sdk_at_cold_start() -> None:
    """One ERROR line when the SDK this module will use cannot name an execution (boto3's default session,
    whose Lambda model the client later reuses, so the check costs nothing more)."""
    try:
        import boto3
    except ImportError:  # not in a function (a synth): nothing starts here
        return
    if boto3.DEFAULT_SESSION is None:
        boto3.setup_default_session()
    assert boto3.DEFAULT_SESSION is not None
    gap = sdk_gap(boto3.DEFAULT_SESSION._session.get_service_model("lambda"))
    if gap is not None:
        reason, hint = gap
        cold_start_error(
            "durable executions cannot be started at all: their records are retried until it is fixed",
            error=reason,
            hint=hint,
        )


_check_sdk_at_cold_start()
