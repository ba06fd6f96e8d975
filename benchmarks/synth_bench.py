"""Synth time (reference stack vs the same resources in plain aws-cdk-lib) and the consumer's asset size.

Run as its own process (`python -m benchmarks.synth_bench`), so the jsii runtime starts and stops with it; it
prints one JSON object on stdout. Both stacks are synthesized in this one process, alternating, after one
untimed synth each (the first synth in a process pays the jsii start, ~3 s, which is not the stacks' cost).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import zipfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.report import paired_ratio

REPO_ROOT = Path(__file__).resolve().parent.parent
CONSUMER_HANDLER = "idempotent_runtime.handler.handler"

AppFactory = Callable[[Path], Any]  # (outdir) -> an App holding one stack


def cdk_json_context() -> dict[str, Any]:
    """The feature flags the CDK CLI passes from cdk.json, given to both apps alike."""
    return dict(json.loads((REPO_ROOT / "cdk.json").read_text()).get("context", {}))


def plain_app(outdir: Path) -> Any:
    import aws_cdk as cdk

    from benchmarks.plain_stack import PlainPipelineStack

    app = cdk.App(context=cdk_json_context(), outdir=str(outdir))
    PlainPipelineStack(app, "PlainPipeline")
    return app


def reference_app(outdir: Path, *, nag: bool = False) -> Any:
    """The reference stack exactly as app.py builds it; cdk-nag off by default (a check, not a resource)."""
    import app as reference

    return reference.build_app(context={**cdk_json_context(), "nag": nag}, outdir=str(outdir))


def jsii_node_cpu_s() -> float | None:
    """CPU seconds used so far by the jsii Node processes (all their threads): the runtime started for Python
    and the program it forks, which does the work. None where unreadable."""
    try:
        import jsii

        pids = [jsii.kernel.provider._process._process.pid]
        children = Path(f"/proc/{pids[0]}/task/{pids[0]}/children")
        pids += [int(child) for child in children.read_text().split()]
        return (
            sum(
                int(Path(task, "schedstat").read_text().split()[0])
                for pid in pids
                for task in Path(f"/proc/{pid}/task").iterdir()
            )
            / 1e9
        )
    except (AttributeError, ImportError, OSError, ValueError, IndexError):
        return None


def synth_once(factory: AppFactory, outdir: Path) -> tuple[dict[str, float], Any]:
    """Seconds to build the app and synthesize it (wall, and CPU of Python + the jsii Node process), and the
    cloud assembly.

    aws-cdk-lib caches asset fingerprints per source path for the life of the process; `cdk synth` runs one
    synth per process, so the cache is cleared first (it would favour the stack whose asset path repeats).
    """
    import aws_cdk as cdk

    cdk.AssetStaging.clear_asset_hash_cache()
    node_before = jsii_node_cpu_s()
    cpu_start = time.process_time()
    start = time.perf_counter()
    app = factory(outdir)
    assembly = app.synth()
    timing = {"wall": time.perf_counter() - start}
    node_after = jsii_node_cpu_s()
    if node_before is not None and node_after is not None:
        timing["cpu"] = time.process_time() - cpu_start + node_after - node_before
    return timing, assembly


def alternate(
    factories: dict[str, AppFactory], pairs: int, workdir: Path
) -> dict[str, dict[str, list[float]]]:
    """kind ("wall", "cpu") -> app name -> seconds per synth."""
    samples: dict[str, dict[str, list[float]]] = {"wall": {}, "cpu": {}}
    names = list(factories)
    for name in names:  # untimed: jsii start, module imports, first-use caches
        synth_once(factories[name], workdir / f"warmup-{name}")
    for round_index in range(pairs):
        order = names if round_index % 2 == 0 else names[::-1]
        for name in order:
            timing, _ = synth_once(factories[name], workdir / f"{name}-{round_index}")
            for kind, seconds in timing.items():
                samples[kind].setdefault(name, []).append(seconds)
    return samples


def jsii_round_trips(factory: AppFactory, outdir: Path, top: int = 6) -> dict[str, Any]:
    """Requests one synth sends to the jsii Node process, by the innermost project frame that sent them.

    Every request is a pipe round trip (~0.5 ms): the usual reason one CDK app synthesizes slower than
    another with the same resources. Untimed; reads jsii's private process provider, so it may go missing.
    """
    try:
        from jsii._kernel.providers.process import _NodeProcess
    except ImportError as error:
        return {"unavailable": str(error)}
    original = _NodeProcess.send
    callers: dict[str, int] = {}
    project = str(REPO_ROOT)
    excluded = str(REPO_ROOT / "benchmarks" / "synth_bench.py")

    def counting_send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        frames = [
            frame
            for frame in traceback.extract_stack()
            if frame.filename.startswith(project)
            and frame.filename != excluded
            and "/.venv/" not in frame.filename
        ]
        where = (
            f"{Path(frames[-1].filename).relative_to(REPO_ROOT)}:{frames[-1].name}"
            if frames
            else "app.synth()"
        )
        callers[where] = callers.get(where, 0) + 1
        return original(self, request, *args, **kwargs)

    _NodeProcess.send = counting_send  # type: ignore[method-assign]
    try:
        synth_once(factory, outdir)
    finally:
        _NodeProcess.send = original  # type: ignore[method-assign]
    busiest = sorted(callers.items(), key=lambda item: item[1], reverse=True)[:top]
    return {"total": sum(callers.values()), "by_caller": dict(busiest)}


def consumer_asset_dir(assembly_dir: Path) -> Path:
    """The asset directory of the Lambda function whose handler is our runtime's, in a cloud assembly."""
    (template_path,) = assembly_dir.glob("*.template.json")
    template = json.loads(template_path.read_text())
    manifest = json.loads(
        template_path.with_name(template_path.name.replace(".template", ".assets")).read_text()
    )
    keys = [
        resource["Properties"]["Code"].get("S3Key")
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
        and resource["Properties"].get("Handler") == CONSUMER_HANDLER
    ]
    if len(keys) != 1 or not isinstance(keys[0], str):
        raise LookupError(
            f"expected one function with handler {CONSUMER_HANDLER} and a plain S3Key, got {keys!r}"
        )
    asset_hash = keys[0].removesuffix(".zip")
    source = manifest["files"][asset_hash]["source"]
    if source.get("packaging") != "zip":
        raise LookupError(f"consumer asset {asset_hash} is not a zipped directory: {source!r}")
    return assembly_dir / source["path"]


def zipped_size(directory: Path) -> dict[str, Any]:
    """Bytes of the directory zipped the way a Lambda code asset is (deflate), plus what is inside."""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "asset.zip"
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            for path in files:
                zf.write(path, path.relative_to(directory).as_posix())
        size = archive.stat().st_size
    return {
        "zip_bytes": size,
        "unzipped_bytes": sum(p.stat().st_size for p in files),
        "files": len(files),
        "pycache_files": sum(1 for p in files if "__pycache__" in p.parts or p.suffix == ".pyc"),
    }


def powertools_asset() -> dict[str, Any]:
    """What the peer ships when bundled as function code: its handler module plus Powertools and its deps."""
    import aws_lambda_powertools
    import jmespath
    import typing_extensions

    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp) / "asset"
        staging.mkdir()

        def copy_package(package_dir: Path) -> None:
            shutil.copytree(
                package_dir, staging / package_dir.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )

        copy_package(Path(aws_lambda_powertools.__file__).parent)
        copy_package(Path(jmespath.__file__).parent)
        shutil.copy(typing_extensions.__file__, staging)
        (staging / "benchmarks").mkdir()
        for name in ("__init__.py", "powertools_peer.py", "powertools_lambda.py"):
            shutil.copy(REPO_ROOT / "benchmarks" / name, staging / "benchmarks")
        return zipped_size(staging)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=5, help="timed synths of each stack (default 5)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the cloud assemblies go")
    args = parser.parse_args(argv)
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "1")
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    with tempfile.TemporaryDirectory(prefix="bench-synth-") as tmp:
        workdir = args.workdir or Path(tmp)
        start = time.perf_counter()
        factories: dict[str, AppFactory] = {
            "reference": reference_app,
            "plain": plain_app,
            "reference_with_nag": partial(reference_app, nag=True),
        }
        samples = alternate(factories, args.pairs, workdir)
        _, assembly = synth_once(reference_app, workdir / "asset")
        round_trips = {
            "reference": jsii_round_trips(reference_app, workdir / "count-reference"),
            "plain": jsii_round_trips(plain_app, workdir / "count-plain"),
        }
        asset = zipped_size(consumer_asset_dir(Path(assembly.directory)))
        result = {
            "synth_s": samples,
            "synth_median_s": {
                kind: {name: statistics.median(values) for name, values in per_app.items()}
                for kind, per_app in samples.items()
            },
            "paired_ratio_median": {
                kind: paired_ratio(per_app["reference"], per_app["plain"])
                for kind, per_app in samples.items()
                if per_app
            },
            "jsii_round_trips": round_trips,
            "asset": asset,
            "powertools_asset": powertools_asset(),
            "process_s": time.perf_counter() - start,
        }
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO_ROOT))
    raise SystemExit(main())
