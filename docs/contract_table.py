"""The environment table of docs/runtime-contract.md, generated from the contract's declarations.

    .venv/bin/python docs/contract_table.py     # rewrites the table in docs/runtime-contract.md

A test fails when the committed table differs from what this writes.
"""

from __future__ import annotations

from pathlib import Path

from idempotent_runtime import contract

DOC = Path(__file__).with_name("runtime-contract.md")
BEGIN = "<!-- environment: generated from contract.ENVIRONMENT by docs/contract_table.py -->"
END = "<!-- environment: end -->"
DAY = 24 * 3600
NONE = "\u2013"  # the docs' en dash: no default


def _default(variable: contract.Variable) -> str:
    if variable.required:
        return f"{NONE} (required)"
    if variable.default is None:
        return NONE
    if variable.default == "":
        return "empty"
    text = f"`{variable.kind.render(variable.default)}`"
    if isinstance(variable.kind, contract.Lifetime) and variable.default == contract.NEVER:
        return f"{text} (never)"
    if isinstance(variable.kind, contract.Seconds) and variable.default % DAY == 0:
        return f"{text} ({variable.default // DAY} days)"
    return text


def values(kind: contract.Kind) -> str:
    """What a kind takes, in words (kept here, out of the function's code asset)."""
    if isinstance(kind, contract.Lifetime):
        return f"seconds; `{contract.NEVER}` or `never`: never expire"
    if isinstance(kind, contract.IntRange):
        return kind.limits()
    if isinstance(kind, contract.Choice):
        return ", ".join(f"`{member}`" for member in kind.enum) + (" (any case)" if kind.upper else "")
    if isinstance(kind, contract.Pattern):
        return kind.wanted.removeprefix("be ").removeprefix("look like ")
    if isinstance(kind, contract.FieldPaths):
        return "a JSON array of dotted paths" + (", at least one" if kind.at_least_one else "")
    return "a dotted path (`order.id`)"


def table() -> str:
    """One row per variable: its name, the option that sets it, its default, the values it takes and what
    it means."""
    rows = ["| variable | option | default | values | meaning |", "|---|---|---|---|---|"]
    for variable in contract.ENVIRONMENT:
        option = f"`{variable.option}`" if variable.option else "from the resources"
        meaning = variable.meaning
        if variable.only is not None:
            on, *accepted = variable.only
            meaning = f"with `{on}={'` or `'.join(accepted)}`: {meaning}"
        cells = (f"`{variable.name}`", option, _default(variable), values(variable.kind), meaning)
        rows.append(f"| {' | '.join(cells)} |")
    return "\n".join(rows)


def render(doc: str) -> str:
    """``doc`` with the table between the markers written anew."""
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


if __name__ == "__main__":
    DOC.write_text(render(DOC.read_text()))
