"""The house's measures, held by tests (docs/architecture.md): no function over 100 lines, no class over 350,
no import circle among the product's modules, the layers of pyproject.toml's import-linter contracts, and a
changelog that says each change in one line."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {
    "idempotent_pipeline": "idempotent_pipeline",
    "idempotent_runtime": "lambda_src/idempotent_runtime",
    "idempotent_local": "idempotent_local",
    "idempotent_cli": "idempotent_cli",
    "idempotent_nag": "idempotent_nag",
}
MAX_FUNCTION_LINES = 100
MAX_CLASS_LINES = 350
MAX_CHANGELOG_LINE = 300


def _definitions(kinds: tuple[type, ...], limit: int) -> list[str]:
    long = []
    for package in PACKAGES.values():
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, kinds):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > limit:
                        long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    return long


def test_no_function_of_the_packages_is_over_100_lines() -> None:
    assert _definitions((ast.FunctionDef, ast.AsyncFunctionDef), MAX_FUNCTION_LINES) == []


def test_no_class_of_the_packages_is_over_350_lines() -> None:
    assert _definitions((ast.ClassDef,), MAX_CLASS_LINES) == []


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.find_modules_directly_imported_by(target)))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_of_the_product_imports_one_that_imports_it_back() -> None:
    """Directly or through others, type-checking imports and imports inside functions included."""
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    assert _circles(graph) == []


def test_the_import_contracts_hold(capsys: pytest.CaptureFixture[str]) -> None:
    """pyproject.toml's [tool.importlinter] contracts: the packages' layers and each package's own."""
    exit_code = lint_imports(str(REPO / "pyproject.toml"), no_cache=True, no_logo=True)
    assert exit_code == 0, capsys.readouterr().out[-4000:]


def test_each_changelog_entry_is_one_line_of_at_most_300_characters() -> None:
    long = [
        f"line {number}: {len(line)} characters"
        for number, line in enumerate((REPO / "CHANGELOG.md").read_text().splitlines(), 1)
        if len(line) > MAX_CHANGELOG_LINE
    ]
    assert long == []
