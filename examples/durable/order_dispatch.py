"""A guarded-mode processor that starts a Lambda durable function's execution once per message key - the
dispatcher AWS tells users to put in front of a durable function: the reference app's demo
(``cdk synth -c durable=true``) ships it, and sets ``DURABLE_FUNCTION_ARN`` to its durable function's
version.

The execution is named for the message's key: a re-run after the environment died between the invocation
and the key's completion, or a delivery after the key's record expired, returns the execution that exists;
another payload for the key goes to the dead-letter queue as a conflict.
"""

from __future__ import annotations

import os

from idempotent_runtime.durable import start_durable_execution_once


def start(message):
    """The durable execution's ARN (what duplicates get back); its payload is the message's JSON body."""
    return start_durable_execution_once(message, os.environ["DURABLE_FUNCTION_ARN"], message.json_object())
