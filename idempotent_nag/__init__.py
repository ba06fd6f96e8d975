"""The library's rules for any CDK app with SNS, SQS and Lambda: a cdk-nag pack (needs the ``nag`` extra).

    from aws_cdk import Validations
    from idempotent_nag import IdempotentPipelineChecks

    Validations.of(app).add_plugins(IdempotentPipelineChecks(app))

The rules (:data:`RULES`, in :mod:`.rules`) read the synthesized templates (:mod:`.templates`); the pack
(:mod:`.pack`) reports what breaks them on the resources, by rule id. See docs/constructs.md.
"""

from __future__ import annotations

try:
    import cdk_nag  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError("idempotent_nag needs cdk-nag: pip install 'idempotent-pipeline[nag]'") from error

from idempotent_nag.pack import PACK_NAME, IdempotentPipelineChecks
from idempotent_nag.rules import RULES, NagRule

__all__ = ["PACK_NAME", "RULES", "IdempotentPipelineChecks", "NagRule"]
