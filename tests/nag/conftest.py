"""The pack's tests share the construct tests' helpers (jsii's environment, cdk.json's flags, the validation
report) and their reference-stack variants."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "constructs"))

import constructs_helpers  # noqa: F401  (sets the variables jsii reads when aws_cdk starts it)
