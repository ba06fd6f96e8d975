"""The pack on an app already synthesized: ``python -m idempotent_nag cdk.out``.

Reads the stacks of a cloud assembly (``cdk.out/manifest.json``, with the assemblies of its stages), prints
each finding as ``<level> IdempotentPipeline-<rule> <construct path>: <what is wrong and what fixes it>``,
and exits 1 when one is an error, as a synth with the pack attached fails. Acknowledgements made with
``Validations`` live in the app, not in its templates: this reports what they would hide.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

from cdk_nag import NagMessageLevel

from idempotent_nag.pack import PACK_NAME
from idempotent_nag.rules import findings
from idempotent_nag.templates import Templates

LEVELS = {NagMessageLevel.ERROR: "error", NagMessageLevel.WARN: "warning"}  # as the validation report says


def stacks(assembly: Path) -> Iterator[tuple[str, str, str]]:
    """(construct path, stack name, template file) of each stack in a cloud assembly and its stages'."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    for id, artifact in manifest.get("artifacts", {}).items():
        properties = artifact.get("properties") or {}
        if artifact.get("type") == "aws:cloudformation:stack":
            template = str(assembly / properties["templateFile"])
            yield artifact.get("displayName", id), properties.get("stackName", id), template
        elif artifact.get("type") == "cdk:cloud-assembly":
            yield from stacks(assembly / properties["directoryName"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idempotent_nag", description=__doc__.splitlines()[0])
    parser.add_argument("assembly", type=Path, help="the directory `cdk synth` wrote (cdk.out)")
    assembly = parser.parse_args(argv).assembly
    if not (assembly / "manifest.json").is_file():
        parser.error(f"{assembly} is not a cloud assembly (no manifest.json in it): synthesize the app first")
    templates = Templates.read(stacks(assembly))
    found = [(templates.resources[key], rule) for key, rules in findings(templates).items() for rule in rules]
    for resource, rule in sorted(found, key=lambda finding: (finding[0].path, finding[1].id)):
        print(f"{LEVELS[rule.level]} {PACK_NAME}-{rule.id} {resource.path}: {rule.info}")
    errors = sum(rule.level == NagMessageLevel.ERROR for _, rule in found)
    print(f"{len(found)} findings, {errors} of them errors")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
