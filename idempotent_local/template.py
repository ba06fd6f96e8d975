"""What a CloudFormation template's resources refer to, read from the template alone (no moto): the emulator's
updates and deletions order resources by it, and ``local deploy`` / ``local status`` name what needs a
resource the emulator did not create."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

PSEUDO_PARAMETER = "AWS::"
SUB_VARIABLE = re.compile(r"\$\{([^!}][^}]*)\}")  # ${Name} or ${Name.Attribute} in Fn::Sub; ${!x} is literal


def references(value: Any) -> set[str]:
    """The logical ids and parameters ``value`` refers to (``Ref``, ``Fn::GetAtt``, ``Fn::Sub``)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "Ref" and isinstance(item, str):
                found.add(item)
            elif key == "Fn::GetAtt":
                target = item.split(".", 1)[0] if isinstance(item, str) else item[0]
                found.add(target)
            elif key == "Fn::Sub":
                text = item[0] if isinstance(item, list) else item
                found |= {name.split(".", 1)[0] for name in SUB_VARIABLE.findall(str(text))}
                if isinstance(item, list):
                    found |= references(item[1:])
            else:
                found |= references(item)
    elif isinstance(value, list):
        for item in value:
            found |= references(item)
    return {name for name in found if not name.startswith(PSEUDO_PARAMETER)}


def attribute_reads(value: Any) -> Iterator[tuple[str, Any]]:
    """Every ``(logical id, attribute)`` that ``value`` reads with ``Fn::GetAtt`` or ``Fn::Sub``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "Fn::GetAtt":
                yield tuple(item.split(".", 1)) if isinstance(item, str) else (item[0], item[1])  # type: ignore[misc]
            elif key == "Fn::Sub":
                text = item[0] if isinstance(item, list) else item
                for name in SUB_VARIABLE.findall(str(text)):
                    if "." in name:
                        yield tuple(name.split(".", 1))  # type: ignore[misc]
                yield from attribute_reads(item)
            else:
                yield from attribute_reads(item)
    elif isinstance(value, list):
        for item in value:
            yield from attribute_reads(item)


def _walk(resources: dict[str, Any], roots: Iterable[str]) -> tuple[list[str], list[str] | None]:
    """The logical ids of ``roots`` and of the resources they need, each after every resource it refers to or
    ``DependsOn``, and the first dependency cycle met on the way (None: there is none)."""
    ordered: list[str] = []
    path: list[str] = []  # the resources being visited, outermost first
    cycle: list[str] | None = None

    def visit(logical_id: str) -> None:
        nonlocal cycle
        if logical_id in path:
            cycle = cycle or path[path.index(logical_id) :]
            return
        if logical_id in ordered:
            return
        path.append(logical_id)
        spec = resources[logical_id]
        for target in sorted(direct(spec if isinstance(spec, dict) else {})):
            if target in resources:
                visit(target)
        path.pop()
        ordered.append(logical_id)

    for logical_id in roots:
        visit(logical_id)
    return ordered, cycle


def dependency_order(resources: dict[str, Any]) -> list[str]:
    """The logical ids of ``resources``, each after every resource it refers to or ``DependsOn`` (a cycle is
    the template's error, refused when the template is checked: :func:`cycle`)."""
    return _walk(resources, resources)[0]


def cycle(resources: dict[str, Any]) -> list[str] | None:
    """The logical ids of the first dependency cycle among ``resources``, if there is one."""
    return _walk(resources, resources)[1]


def needed_by(resources: dict[str, Any], roots: set[str]) -> set[str]:
    """``roots`` and every resource they refer to (``Ref``, ``Fn::GetAtt``, ``Fn::Sub``, ``DependsOn``),
    transitively."""
    return set(_walk(resources, sorted(r for r in roots if r in resources))[0])


def direct(spec: dict[str, Any]) -> set[str]:
    """What one resource refers to or ``DependsOn``."""
    depends = spec.get("DependsOn", [])
    return references(spec) | set([depends] if isinstance(depends, str) else depends)


__all__ = ["attribute_reads", "cycle", "dependency_order", "direct", "needed_by", "references"]
