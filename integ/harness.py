"""Snapshots and real-account runs of the integration tests (``integ_*.py``), the way integ-runner does them.

    python integ/harness.py snapshots        # make integ-snapshots: rewrite the snapshots that changed
    python integ/harness.py deploy [APP...]  # make integ: deploy, assert, destroy (current credentials)

Why not ``@aws-cdk/integ-runner`` itself: its newest release (2.197.10) reads cloud assemblies up to schema
53, and aws-cdk-lib 2.275 writes schema 55 ("Maximum schema version supported is 53.x.x, but found 55.0.0"),
so it can neither snapshot nor deploy these apps. Everything else is integ-runner's: the apps (``IntegTest``
and its assertions), the snapshot directories and what they hold (the cloud assembly without its asset
directories), the context they are synthesized with (cdk.json's, creation stack traces off, no version
reporting, no path or asset metadata) and what a comparison ignores (asset hashes). Once an integ-runner
reads schema 55, ``npx integ-runner --language python --directory integ`` takes over.

A comparison also covers the assertion stack (integ-runner skips it): the assertions are the test. Its custom
resources carry a ``salt`` (the synth time, so that every deployment runs them again), which is ignored too;
a snapshot is rewritten only when something else changed, so an unchanged app leaves its files as they are.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

INTEG = Path(__file__).resolve().parent
REPO = INTEG.parent
APPS = sorted(INTEG.glob("integ_*.py"))
# Where `deploy` writes each app's cloud assembly, CLI log and outputs (cdk.out/ is ignored by git).
RUNS = REPO / "cdk.out" / "integ"
REGENERATE = "make integ-snapshots"

# What integ-runner adds to the app's context when it synthesizes a snapshot.
SNAPSHOT_CONTEXT = {
    "aws:cdk:disable-creation-stack-traces": True,
    "aws:cdk:version-reporting": False,
    "aws:cdk:enable-path-metadata": False,
    "aws:cdk:enable-asset-metadata": False,
}
ASSERTION_RESOURCE = "Custom::DeployAssert@"
ASSET_HASH = "<asset hash>"
SALT = "<salt>"


def snapshot_dir(app: Path) -> Path:
    return app.with_name(f"{app.name}.snapshot")


def snapshot_context() -> dict[str, Any]:
    """cdk.json's context (its feature flags: integ-runner reads the nearest cdk.json) + integ-runner's."""
    return json.loads((REPO / "cdk.json").read_text())["context"] | SNAPSHOT_CONTEXT


def load(app: Path) -> Any:
    """The app's module (``build(app)``, ``SCENARIO``), imported as integ-runner's ``python <file>`` finds
    it: from the integ directory, with the processors' sources beside it."""
    for path in (INTEG / "src", INTEG):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    return importlib.import_module(app.stem)


def synthesize(app: Path, outdir: Path) -> Path:
    """Synthesize ``app`` into ``outdir`` in this process (jsii starts once for every app)."""
    import aws_cdk as cdk

    cdk_app = cdk.App(outdir=str(outdir), context=snapshot_context())
    load(app).build(cdk_app)
    cdk_app.synth()
    return outdir


def _asset_hashes(assembly: Path) -> set[str]:
    hashes: set[str] = set()
    for manifest in assembly.glob("*.assets.json"):
        for kind in ("files", "dockerImages"):
            hashes.update(json.loads(manifest.read_text()).get(kind, {}))
    return hashes


def compared(assembly: Path) -> dict[str, Any]:
    """What a comparison looks at: ``integ.json`` and every template, asset hashes and salts replaced, without
    the schema versions the installed cloud-assembly-schema writes (a newer release raises them)."""
    hashes = _asset_hashes(assembly)
    found: dict[str, Any] = {}
    for path in sorted([assembly / "integ.json", *assembly.glob("*.template.json")]):
        if not path.exists():
            continue
        text = path.read_text()
        for asset_hash in hashes:
            text = text.replace(asset_hash, ASSET_HASH)
        document = json.loads(text)
        for written_by_the_schema in ("version", "minimumCliVersion"):
            document.pop(written_by_the_schema, None)
        for resource in document.get("Resources", {}).values():
            if resource.get("Type", "").startswith(ASSERTION_RESOURCE) and "salt" in resource["Properties"]:
                resource["Properties"]["salt"] = SALT
        found[path.name] = document
    return found


def differences(app: Path, fresh: Path) -> list[str]:
    """How the committed snapshot of ``app`` differs from the cloud assembly ``fresh``: one line per file."""
    committed = snapshot_dir(app)
    if not committed.is_dir():
        return [f"{committed.name}: missing"]
    old, new = compared(committed), compared(fresh)
    lines = [
        f"{name}: {_first_difference(old.get(name), new.get(name))}"
        for name in sorted(old.keys() | new.keys())
    ]
    return [line for line in lines if not line.endswith(": same")]


def _first_difference(old: Any, new: Any, where: str = "") -> str:
    if old == new:
        return "same"
    if old is None or new is None:
        return "only in the new synth" if old is None else "only in the snapshot"
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            if old.get(key) != new.get(key):
                return _first_difference(old.get(key), new.get(key), f"{where}/{key}")
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{where}/{index}")
    if isinstance(old, str) and isinstance(new, str):  # from the first character that differs
        start = next(
            (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new))
        )
        old, new = old[max(0, start - 20) :], new[max(0, start - 20) :]
    return f"differs at {where or '/'}: snapshot {json.dumps(old)[:100]}, synth {json.dumps(new)[:100]}"


def write_snapshot(app: Path, fresh: Path) -> None:
    """Replace the snapshot of ``app`` with the cloud assembly ``fresh``, without its asset directories (the
    bundled runtime and the assertion provider's 6 MB bundle: integ-runner leaves them out too)."""
    target = snapshot_dir(app)
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(fresh, target, ignore=shutil.ignore_patterns("asset.*", ".cache"))
    target.chmod(0o755)  # not the temporary directory's 0700


def snapshots() -> int:
    for app in APPS:
        with tempfile.TemporaryDirectory(prefix=f"{app.stem}.") as outdir:
            fresh = synthesize(app, Path(outdir))
            changed = differences(app, fresh)
            if changed:
                write_snapshot(app, fresh)
            print(f"{os.path.relpath(snapshot_dir(app))}: {'updated' if changed else 'unchanged'}")
            for line in changed:
                print(f"    {line}")
    return 0


# --- make integ ---------------------------------------------------------------------------------------------


class Refused(Exception):
    """The run cannot start (no credentials, no region): the message says what to do."""


def account() -> tuple[str, str]:
    """(account id, region) of the current credentials, or :class:`Refused`."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    usage = (
        "make integ AWS_PROFILE=my-profile (a profile with a region, in an account and region bootstrapped "
        "by `npx cdk bootstrap`)"
    )
    try:
        session = boto3.Session()
        credentials = session.get_credentials()
    except BotoCoreError as exc:
        raise Refused(
            f"make integ deploys to a real AWS account; its credentials cannot be read: {exc}\n{usage}"
        ) from None
    if credentials is None:
        raise Refused(f"make integ deploys to a real AWS account and found no AWS credentials.\n{usage}")
    if not session.region_name:
        raise Refused(
            f"make integ found credentials but no region: set one in the profile or AWS_REGION.\n{usage}"
        )
    try:
        identity = session.client("sts").get_caller_identity()
    except (BotoCoreError, ClientError) as exc:
        raise Refused(f"make integ: the AWS credentials were refused ({exc}).\n{usage}") from None
    return identity["Account"], session.region_name


def _cdk(app: Path, *arguments: str, log: Path) -> int:
    npx = shutil.which("npx")
    if npx is None:
        raise Refused("npx is needed for the pinned CDK CLI: run `make setup`")
    command = [
        npx, "--no-install", "cdk",
        "--app", f"{shlex.quote(sys.executable)} {shlex.quote(str(app))}",
        "--output", str(RUNS / app.stem / "assembly"),
        *arguments,
    ]  # fmt: skip
    with log.open("a") as out:
        out.write(f"$ {shlex.join(command)}\n")
        out.flush()
        # From the repository: the CLI reads cdk.json's context (the flags the snapshots were made with).
        return subprocess.run(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, check=False).returncode


def failed_assertions(outputs: Path) -> list[str]:
    """The ``AssertionResults`` outputs that say ``fail`` (``cdk deploy --outputs-file``)."""
    failures = []
    stacks = json.loads(outputs.read_text()) if outputs.exists() else {}
    for stack, values in stacks.items():
        for name, value in values.items():
            if name.startswith("AssertionResults"):
                with contextlib.suppress(ValueError):
                    result = json.loads(value)
                    if result.get("status") == "fail":
                        failures.append(f"{stack}.{name}: {result.get('message', '')}")
    return failures


def run(app: Path, *, keep: bool, say: Any) -> bool:
    """Deploy ``app`` (its test stack, then the assertion stack, whose steps run during the deployment),
    check the assertion outputs, then destroy everything unless ``keep``. True when every assertion held."""
    directory = RUNS / app.stem
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    log, outputs = directory / "cdk.log", directory / "outputs.json"
    say(app, f"deploying and asserting (log: {os.path.relpath(log)})")
    deployed = _cdk(
        app, "deploy", "--all", "--require-approval", "never", "--outputs-file", str(outputs), log=log
    )
    failures = failed_assertions(outputs)
    passed = deployed == 0 and not failures
    if deployed != 0:
        tail = log.read_text().splitlines()[-15:]
        say(app, "FAILED: the deployment failed (an assertion that never held fails its step):", *tail)
    elif failures:
        say(app, "FAILED:", *failures)
    else:
        say(app, "every assertion held")
    if keep:
        say(
            app,
            f"kept (--keep): remove with npx cdk destroy --all --force --app 'python {os.path.relpath(app)}'",
        )
    elif _cdk(app, "destroy", "--all", "--force", log=log) != 0:
        say(app, f"DESTROY FAILED: stacks are left in the account, see {os.path.relpath(log)}")
        passed = False
    else:
        say(app, "destroyed")
    return passed


def deploy(names: list[str], *, keep: bool) -> int:
    apps = [app for app in APPS if not names or app.stem in names or app.name in names]
    if names and len(apps) != len(names):
        raise Refused(f"unknown integration tests {names}; there are {[app.stem for app in APPS]}")
    account_id, region = account()
    print(f"==> {len(apps)} integration tests on account {account_id} in {region}, in parallel")
    lock = threading.Lock()

    def say(app: Path, *lines: str) -> None:
        with lock:
            for line in lines:
                print(f"{app.stem}: {line}", flush=True)

    os.environ.update(AWS_REGION=region, AWS_DEFAULT_REGION=region)  # the CLI's region: the profile's
    with ThreadPoolExecutor(max_workers=len(apps)) as pool:
        results = dict(zip(apps, pool.map(lambda app: run(app, keep=keep, say=say), apps), strict=True))
    failed = [app.stem for app, passed in results.items() if not passed]
    summary = f"==> {len(apps) - len(failed)} passed, {len(failed)} failed"
    print(f"{summary}: {', '.join(failed)}" if failed else summary)
    return 1 if failed else 0


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    try:
        yield
    except Refused as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "snapshots", help=f"{REGENERATE}: synthesize every app, rewrite the snapshots that changed"
    )
    run_parser = commands.add_parser(
        "deploy", help="make integ: deploy, assert, destroy (a real AWS account)"
    )
    run_parser.add_argument("apps", nargs="*", help="only these tests (integ_guarded, ...); default: all")
    run_parser.add_argument("--keep", action="store_true", help="leave the stacks deployed, to investigate")
    arguments = parser.parse_args(argv)
    with _refusals():
        if arguments.command == "snapshots":
            return snapshots()
        return deploy(arguments.apps, keep=arguments.keep)


if __name__ == "__main__":
    sys.exit(main())
