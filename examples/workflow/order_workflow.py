"""A guarded-mode processor that starts a Step Functions workflow once per message key: the reference app's
demo (``cdk synth -c workflow=true``) ships it, and sets ``STATE_MACHINE_ARN`` to its state machine.

The execution is named for the message's key: a re-run after the environment died between the start and the
key's completion, or a delivery after the key's record expired, returns the execution that exists.
"""

from __future__ import annotations

import os

from idempotent_runtime.workflows import start_execution_once


def start(message):
    """The execution's ARN (the result duplicates get back); its input is the message's JSON body."""
    return start_execution_once(message, os.environ["STATE_MACHINE_ARN"], message.json_object())
