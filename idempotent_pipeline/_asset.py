"""Stage the consumer's code asset: the bundled runtime plus the user's processing code. No Docker."""

from __future__ import annotations

import atexit
import importlib.util
import re
import shutil
import tempfile
from pathlib import Path

from idempotent_pipeline._checks import ConfigurationError

RUNTIME_PACKAGE = "idempotent_runtime"
HANDLER = f"{RUNTIME_PACKAGE}.handler.handler"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")
# module:function, the function possibly an attribute path (module:Class.method), as the runtime accepts.
_PROCESSOR = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def runtime_source() -> Path:
    """The directory of the importable idempotent_runtime package (a checkout or an installed wheel)."""
    spec = importlib.util.find_spec(RUNTIME_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigurationError(
            f"the {RUNTIME_PACKAGE} package is not importable; install idempotent-pipeline "
            "(pip install idempotent-pipeline) so the consumer can bundle its runtime"
        )
    return Path(locations[0])


def check_processor(processor: str | None, code_directory: str | None) -> Path | None:
    """Validate ``module:function`` and the directory that holds the module; return the directory."""
    if processor is None and code_directory is None:
        return None
    if processor is None:
        raise ConfigurationError(
            f"code_directory is set ({code_directory!r}) but processor is not; give processor as "
            "'module:function' naming a function in that directory"
        )
    if not _PROCESSOR.match(processor):
        raise ConfigurationError(
            f"processor must look like 'module:function' (e.g. 'orders:handle'); got {processor!r}"
        )
    if code_directory is None:
        raise ConfigurationError(
            f"processor {processor!r} needs code_directory: the directory holding module "
            f"{processor.split(':')[0]!r}"
        )
    directory = Path(code_directory)
    if not directory.is_dir():
        raise ConfigurationError(f"code_directory must be an existing directory; got {code_directory!r}")
    if (directory / RUNTIME_PACKAGE).exists() or (directory / f"{RUNTIME_PACKAGE}.py").exists():
        raise ConfigurationError(
            f"code_directory must not contain {RUNTIME_PACKAGE!r}: it would shadow the bundled runtime; "
            f"got {code_directory!r}"
        )
    module = processor.split(":")[0]
    if module.split(".")[0] == RUNTIME_PACKAGE:
        raise ConfigurationError(f"processor must name a module of your own code; got {processor!r}")
    relative = Path(*module.split("."))
    candidates = [directory / relative.with_suffix(".py"), directory / relative / "__init__.py"]
    if not any(candidate.is_file() for candidate in candidates):
        raise ConfigurationError(
            f"processor module {module!r} is not in code_directory {code_directory!r} "
            f"(looked for {relative.with_suffix('.py')} and {relative / '__init__.py'})"
        )
    return directory


def stage_asset(code_directory: Path | None) -> str:
    """Copy the runtime (and the user's code beside it) into a fresh directory for ``Code.from_asset``.

    The directory lives until the process exits: the asset is copied into the cloud assembly at synth.
    """
    staging = Path(tempfile.mkdtemp(prefix="idempotent-pipeline-asset-"))
    atexit.register(shutil.rmtree, staging, True)
    if code_directory is not None:
        shutil.copytree(code_directory, staging, ignore=_IGNORE, dirs_exist_ok=True)
    shutil.copytree(runtime_source(), staging / RUNTIME_PACKAGE, ignore=_IGNORE)
    return str(staging)
