"""No function in the packages over 100 lines: a constructor or handler that grows past that is split into
named phases (docs/style: constructors that read like aws-cdk-lib's)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = (
    "idempotent_pipeline",
    "lambda_src/idempotent_runtime",
    "idempotent_local",
    "idempotent_cli",
    "idempotent_nag",
)
MAX_LINES = 100


def test_no_function_of_the_packages_is_over_100_lines() -> None:
    long = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_LINES:
                        long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
