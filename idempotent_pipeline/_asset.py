"""Stage the consumer's code asset: the bundled runtime, the user's code (its Python sources and the files it
names with ``include``: an allow-list, since no list of secrets is ever complete) and the wheels its
``requirements.txt`` names. No Docker."""

from __future__ import annotations

import ast
import atexit
import hashlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from idempotent_runtime import contract
from idempotent_runtime.contract import ConfigurationError, Mode

RUNTIME_PACKAGE = contract.RUNTIME_PACKAGE
HANDLER = contract.HANDLER
# Lambda's limit for a function's code and layers, unzipped: 250 MB (262,144,000 bytes).
MAX_UNZIPPED_BYTES = 262_144_000
REQUIREMENTS = "requirements.txt"
# Where installed requirements are cached (default: $XDG_CACHE_HOME or ~/.cache, then idempotent-pipeline).
CACHE_VARIABLE = "IDEMPOTENT_PIPELINE_CACHE"
# `idempotent-pipeline local deploy` names here the Python its `local run` runs the function with:
# requirements are then installed for that interpreter, not for the function's runtime in AWS (a deploy to
# AWS never sets it).
LOCAL_PYTHON_VARIABLE = "IDEMPOTENT_PIPELINE_LOCAL_PYTHON"
_NO_WHEEL = re.compile(r"No matching distribution found for (\S+)")


@dataclass(frozen=True)
class Target:
    """What the function runs on: wheels are chosen for it."""

    python_version: str  # e.g. "3.14"
    architecture: str  # "arm64" or "x86_64"

    @property
    def platforms(self) -> tuple[str, ...]:
        # The Python runtimes the consumer uses (3.12 and later) run on Amazon Linux 2023, glibc 2.34.
        machine = "aarch64" if self.architecture == "arm64" else "x86_64"
        return tuple(f"{tag}_{machine}" for tag in ("manylinux2014", "manylinux_2_28", "manylinux_2_34"))


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


# -- the processor ----------------------------------------------------------------------------------------


def check_processor(
    processor: str | None, code_directory: str | None, exclude: Sequence[str] = ()
) -> tuple[Path | None, str | None]:
    """Validate ``module:function`` against the code directory as the asset will hold it (``exclude``:
    ``ConsumerOptions.exclude``), reading the module (never importing it) where Python would import it
    from (a package before a module of the same name).

    Returns the directory and, when the module could not be read with this Python, a note saying so.
    """
    if processor is None and code_directory is None:
        return None, None
    if processor is None:
        raise ConfigurationError(
            f"ConsumerOptions.code_directory is set ({code_directory!r}) but processor is not; give "
            "processor as 'module:function' naming a function in that directory"
        )
    contract.PROCESSOR.kind.coerce("ConsumerOptions.processor", processor)  # a deploy-time one: refused
    module, attribute = processor.split(":")
    if code_directory is None:
        raise ConfigurationError(
            f"ConsumerOptions.processor {processor!r} needs code_directory: the directory holding module "
            f"{module!r}"
        )
    directory = Path(code_directory)
    if not directory.is_dir():
        raise ConfigurationError(
            f"ConsumerOptions.code_directory must be an existing directory; got {code_directory!r}"
        )
    if (directory / RUNTIME_PACKAGE).exists() or (directory / f"{RUNTIME_PACKAGE}.py").exists():
        raise ConfigurationError(
            f"ConsumerOptions.code_directory must not contain {RUNTIME_PACKAGE!r}: it would shadow the "
            f"bundled runtime; got {code_directory!r}"
        )
    if module.split(".")[0] == RUNTIME_PACKAGE:
        raise ConfigurationError(
            f"ConsumerOptions.processor must name a module of your own code; got {processor!r}"
        )
    relative = Path(*module.split("."))
    candidates = [relative / "__init__.py", relative.with_suffix(".py")]
    found = next((directory / c for c in candidates if (directory / c).is_file()), None)
    if found is None:
        raise ConfigurationError(
            f"processor module {module!r} is not in code_directory {code_directory!r} "
            f"(looked for {candidates[0]} and {candidates[1]})"
        )
    shipped = PurePosixPath(found.relative_to(directory).as_posix())
    for depth in range(1, len(shipped.parts) + 1):
        part = PurePosixPath(*shipped.parts[:depth])
        reason = _never_shipped(directory / part, part, exclude, directory=depth < len(shipped.parts))
        if reason is not None:
            raise ConfigurationError(
                f"processor module {module!r} ({shipped}) is left out of the asset: {part} {reason}; the "
                "function could not import it"
            )
    try:
        tree = ast.parse(found.read_bytes(), filename=str(found))
    except (SyntaxError, ValueError) as error:
        return directory, (
            f"processor {processor!r} was not checked: {found} does not parse with this Python "
            f"({sys.version_info.major}.{sys.version_info.minor}): {error}"
        )
    missing = _missing(tree, attribute.split("."))
    if missing is not None:
        raise ConfigurationError(f"processor {processor!r}: {found.relative_to(directory)} {missing}")
    return directory, None


def _missing(tree: ast.Module, path: list[str]) -> str | None:
    """What is missing on the way to ``path`` in a module, or None when it is there (or cannot be known)."""
    names, open_ended = _bindings(tree.body)
    head = path[0]
    if head not in names:
        if open_ended or "__getattr__" in names:
            return None  # `from x import *` or a module __getattr__: cannot tell without importing
        functions = sorted(
            n for n, node in names.items() if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        )
        listed = f" (its functions: {', '.join(functions)})" if functions else ""
        return f"defines no {head!r} at module level{listed}"
    node = names[head]
    for part in path[1:]:
        if not isinstance(node, ast.ClassDef):
            return None  # an attribute of something other than a class defined here: cannot tell
        members, open_ended = _bindings(node.body)
        if part not in members:
            if node.bases or open_ended:
                return None  # it may be inherited
            return f"class {node.name!r} defines no {part!r}"
        node = members[part]
    return None


def _bindings(body: Iterable[ast.stmt]) -> tuple[dict[str, ast.AST], bool]:
    """Names a block of statements binds (also inside if/try/with/for blocks); True when open-ended."""
    names: dict[str, ast.AST] = {}
    open_ended = False
    for statement in body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[statement.name] = statement
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        names[node.id] = statement
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            if isinstance(statement.target, ast.Name):
                names[statement.target.id] = statement
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            for alias in statement.names:
                if alias.name == "*":
                    open_ended = True
                else:
                    names[alias.asname or alias.name.split(".")[0]] = statement
        else:
            for block in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(statement, block, None)
                if isinstance(inner, list) and inner:
                    statements = [s for h in inner for s in h.body] if block == "handlers" else inner
                    more, open_inner = _bindings(statements)
                    names.update(more)
                    open_ended = open_ended or open_inner
    return names, open_ended


# -- what the asset holds ---------------------------------------------------------------------------------

# The user's code ships as its Python sources plus what ConsumerOptions.include names: an allow-list, because
# a list of what must not ship (credentials, state files, keys) can never be complete, and Lambda lets anyone
# with lambda:GetFunction download the package.
SHIPPED = ("*.py",)
# Never searched, whatever include says: dependencies, build output and caches. Hidden files and directories
# (.git, .env, .aws, .venv, ...) never ship either, nor any directory holding a pyvenv.cfg (a virtualenv).
NEVER_SEARCHED = ("node_modules", "cdk.out", "__pycache__", "*.egg-info")
# Files left out without a word: compiled Python (Python writes it when it imports the sources).
UNREMARKABLE = ("*.pyc", "*.pyo")
# The left-out files a synth warning names (the count says how many more).
LISTED = 10


def _excluded(relative: PurePosixPath, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        if "/" in pattern:
            if _path_matches(relative.parts, tuple(pattern.strip("/").split("/"))):
                return True
        elif fnmatchcase(relative.name, pattern):
            return True
    return False


def _path_matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Glob over path segments: ``*`` stays within a segment, ``**`` spans any number of them."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_path_matches(parts[skip:], pattern[1:]) for skip in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], pattern[0]) and _path_matches(parts[1:], pattern[1:])


def _never_shipped(
    path: Path, relative: PurePosixPath, exclude: Sequence[str], *, directory: bool
) -> str | None:
    """Why a file or directory of the code directory never ships, whatever include says (None: it may)."""
    if relative.name.startswith("."):
        return "is hidden"
    if _excluded(relative, exclude):
        return "matches ConsumerOptions.exclude"
    if directory and (_excluded(relative, NEVER_SEARCHED) or (path / "pyvenv.cfg").is_file()):
        return "is a directory of dependencies, build output, caches or a virtualenv"
    return None


def _named(relative: PurePosixPath, include: Sequence[str]) -> bool:
    """Shipped: a Python source, or matched - itself or a directory above it - by an include pattern."""
    if _excluded(relative, SHIPPED):
        return True
    return any(
        _excluded(PurePosixPath(*relative.parts[:depth]), include)
        for depth in range(1, len(relative.parts) + 1)
    )


def select_files(
    directory: Path, include: Sequence[str], exclude: Sequence[str]
) -> tuple[list[tuple[Path, PurePosixPath]], list[PurePosixPath]]:
    """The files of the code directory that ship ``(source, relative path)``, and the others left out that
    may be data the function reads (not hidden, excluded, a cache, or in a directory never searched)."""
    shipped, left_out = [], []
    for root, dirs, files in os.walk(directory):
        base = PurePosixPath(Path(root).relative_to(directory).as_posix())
        dirs[:] = sorted(
            d for d in dirs if _never_shipped(Path(root, d), base / d, exclude, directory=True) is None
        )
        for name in sorted(files):
            relative = base / name
            if _never_shipped(Path(root, name), relative, exclude, directory=False) is not None:
                continue
            if _named(relative, include):
                shipped.append((Path(root, name), relative))
            elif not _excluded(relative, UNREMARKABLE):
                left_out.append(relative)
    return shipped, left_out


def left_out_note(left_out: Sequence[PurePosixPath]) -> str | None:
    """What a synth warning says about files of the code directory the asset leaves out (names only)."""
    if not left_out:
        return None
    listed = ", ".join(sorted(str(path) for path in left_out)[:LISTED])
    more = f" and {len(left_out) - LISTED} more" if len(left_out) > LISTED else ""
    return (
        f"the function's code asset leaves out {len(left_out)} file(s) of code_directory that are not Python "
        f"sources: {listed}{more}. Only *.py files and what ConsumerOptions.include names ship (e.g. "
        "include=['*.json'] or ['data']); list the rest in ConsumerOptions.exclude to leave them out without "
        "this warning"
    )


def _tree(directory: Path) -> list[tuple[Path, PurePosixPath]]:
    return [
        (path, PurePosixPath(path.relative_to(directory).as_posix()))
        for path in sorted(directory.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")
    ]


def check_size(parts: dict[str, list[tuple[Path, PurePosixPath]]]) -> None:
    """The asset must stay within Lambda's 250 MB unzipped."""
    total = sum(source.stat().st_size for files in parts.values() for source, _ in files)
    if total <= MAX_UNZIPPED_BYTES:
        return
    largest: Counter[str] = Counter()
    for origin, files in parts.items():
        for source, relative in files:
            top = f"{origin}: {relative.parts[0]}{'/' if len(relative.parts) > 1 else ''}"
            largest[top] += source.stat().st_size
    listed = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in largest.most_common(3))
    raise ConfigurationError(
        f"the function's code asset would be {total / 1e6:.1f} MB unzipped, over Lambda's 250 MB limit "
        f"({MAX_UNZIPPED_BYTES} bytes); largest: {listed}. Leave out what the function does not need with "
        "ConsumerOptions.exclude, or move it to a layer"
    )


# -- requirements.txt -------------------------------------------------------------------------------------


def cache_root() -> Path:
    configured = os.environ.get(CACHE_VARIABLE)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "idempotent-pipeline"


# pip's options that name another requirements or constraints file: -r FILE, -rFILE, --requirement FILE,
# --requirement=FILE, and the same for -c / --constraint.
_INCLUDE = re.compile(r"^(?:--requirement|--constraint|-r|-c)(?:\s*=\s*|\s+|(?=[^\s=-]))(\S+)")
_COMMENT = re.compile(r"(^|\s+)#.*$")
_ENV_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)\}")  # pip expands ${VAR} (this form only) in requirement files


def requirement_files(requirements: Path) -> list[Path]:
    """``requirements`` and every file it includes with -r / -c, recursively, each once and in order.

    An included path is relative to the file that includes it (as pip reads it); URLs are pip's business.
    """
    found: list[Path] = []

    def visit(path: Path) -> None:
        resolved = path.resolve()
        if resolved in found:
            return
        found.append(resolved)
        try:
            text = resolved.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return  # pip reports a missing file, naming it
        for line in text.replace("\\\n", " ").splitlines():
            line = _ENV_VARIABLE.sub(lambda m: os.environ.get(m.group(1), m.group(0)), line)
            match = _INCLUDE.match(_COMMENT.sub("", line).strip())
            if match is not None and "://" not in match.group(1):
                visit(resolved.parent / match.group(1))

    visit(requirements)
    return found


def _for_whom(target: Target) -> tuple[list[str], str]:
    """pip's arguments that choose the wheels, and who they are for (in messages): the function's runtime,
    or the interpreter :data:`LOCAL_PYTHON_VARIABLE` names (pip then picks what that Python can import)."""
    local_python = os.environ.get(LOCAL_PYTHON_VARIABLE)
    if local_python:
        return ["--python", local_python], f"the Python that runs it locally ({local_python})"
    machine = target.platforms[0].split("_", 1)[1]
    arguments = ["--implementation", "cp", "--python-version", target.python_version]
    arguments += [argument for platform in target.platforms for argument in ("--platform", platform)]
    return arguments, f"the function (CPython {target.python_version}, manylinux {machine})"


def install_requirements(requirements: Path, target: Target) -> Path:
    """Install ``requirements`` (wheels only, for ``target``) into a cached directory and return it.

    The cache key is a hash of the requirements, of every file they include (``-r`` / ``-c``, recursively)
    and of the target (delete the cache directory to install them anew); pip's own environment
    (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``, a pip.conf) applies as for any pip run.
    With :data:`LOCAL_PYTHON_VARIABLE` set, the target is that interpreter instead.
    """
    digest = hashlib.sha256()
    for path in requirement_files(requirements):
        try:
            content = path.read_bytes()
        except OSError:
            content = b"\0missing"
        digest.update(hashlib.sha256(content).digest())
    arguments, for_whom = _for_whom(target)
    local_python = os.environ.get(LOCAL_PYTHON_VARIABLE)
    # A venv's python is a link to its interpreter: the interpreter decides which wheels it can import.
    parts = ["local", str(Path(local_python).resolve())] if local_python else []
    for part in (target.python_version, target.architecture, *target.platforms, *parts):
        digest.update(b"\0" + part.encode())
    root = cache_root() / "requirements"
    installed = root / digest.hexdigest()[:32]
    if installed.is_dir():
        return installed
    if importlib.util.find_spec("pip") is None:
        raise ConfigurationError(
            f"{requirements} needs pip to be installed at synth; install pip into this Python "
            f"({sys.executable})"
        )
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".installing-", dir=root))
    interpreter = arguments[:2] if local_python else []  # pip's --python goes before its command
    command = [
        sys.executable,
        "-m",
        "pip",
        *interpreter,
        "install",
        "--requirement",
        str(requirements.resolve()),
        "--target",
        str(staging),
        "--only-binary=:all:",
        *(arguments if not local_python else []),
        "--no-compile",
        "--no-input",
        "--disable-pip-version-check",
        "--quiet",
    ]
    result = subprocess.run(
        command, cwd=requirements.parent, capture_output=True, text=True, check=False, env=dict(os.environ)
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        output = (result.stderr or result.stdout).strip()
        no_wheel = _NO_WHEEL.search(output)
        if no_wheel is not None:
            raise ConfigurationError(
                f"{requirements}: no wheel of {no_wheel.group(1)!r} for {for_whom}; requirements are "
                "installed at synth from wheels only (no compiler, no Docker): pin a version that publishes "
                "such a wheel, or ship the dependency in a layer"
            )
        raise ConfigurationError(f"{requirements}: pip could not install it:\n{output[-2000:]}")
    if (staging / RUNTIME_PACKAGE).exists():
        shutil.rmtree(staging, ignore_errors=True)
        raise ConfigurationError(
            f"{requirements} installs {RUNTIME_PACKAGE!r} (e.g. idempotent-pipeline itself): the consumer "
            "bundles its own runtime; remove it from the requirements"
        )
    try:
        staging.rename(installed)
    except OSError:  # another synth installed the same requirements meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return installed


# -- staging ----------------------------------------------------------------------------------------------

# Modules of the runtime package the function never imports - the producer helper, the DLQ tool's record
# inspection, the processors' test helper and the workflow and durable execution starters: the asset holds
# them only when the user's code names them (with those of them they import).
NOT_RUN_BY_THE_FUNCTION = ("publisher", "records", "testing", "workflows", "durable")


def _runtime_modules_imported(files: Iterable[tuple[Path, PurePosixPath]]) -> set[str]:
    """Which of :data:`NOT_RUN_BY_THE_FUNCTION` the user's Python files may import: a file naming the runtime
    package and a module's name anywhere (any import form, even a comment) ships that module."""
    found: set[str] = set()
    for source, relative in files:
        if relative.suffix != ".py":
            continue
        text = source.read_bytes()
        if RUNTIME_PACKAGE.encode() in text:
            found.update(
                name for name in NOT_RUN_BY_THE_FUNCTION if re.search(rb"\b%s\b" % name.encode(), text)
            )
    pending = sorted(found)
    while pending:  # and those they import: the durable starter runs the workflow starter's mechanism
        more = _runtime_imports(pending.pop()) & set(NOT_RUN_BY_THE_FUNCTION) - found
        found.update(more)
        pending.extend(more)
    return found


def _runtime_imports(module: str) -> set[str]:
    """The runtime's modules a module of the runtime imports (its import statements)."""
    tree = ast.parse((runtime_source() / f"{module}.py").read_bytes())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(RUNTIME_PACKAGE):
            parts = (node.module or "").split(".")
            found.update([alias.name for alias in node.names] if len(parts) == 1 else [parts[1]])
    return found


# The outbox ships with a consumer that emits; the relay's module with the relay function only.
EMITTING = "outbox"
RELAY = "relay"
_MODE_IMPORT = re.compile(r"^from idempotent_runtime\.modes\.(\w+) import", re.MULTILINE)


def mode_modules(mode: Mode) -> set[str]:
    """The modules of ``modes/`` a function of ``mode`` imports: the mode's own and those of the modes it
    builds on, as its module's imports name them (versioned mode builds on document mode's)."""
    found: set[str] = set()
    wanted = [mode.value]
    while wanted:
        name = wanted.pop()
        if name in found or name not in {m.value for m in Mode}:
            continue
        found.add(name)
        wanted += _MODE_IMPORT.findall((runtime_source() / "modes" / f"{name}.py").read_text())
    return found


def runtime_files(
    mode: Mode | None, wanted: set[str], emits: bool = False
) -> list[tuple[Path, PurePosixPath]]:
    """The runtime's files the function runs: without :data:`NOT_RUN_BY_THE_FUNCTION` (unless ``wanted``)
    and without the modules of the modes it does not run (:func:`mode_modules`; all of them when the user's
    code names ``records``, which works with any mode); with the outbox when it ``emits``. ``mode`` None: the
    relay function's, the modules the relay imports."""
    if mode is None:
        return relay_files()
    skipped_modes = set() if "records" in wanted else {m.value for m in Mode} - mode_modules(mode)
    skipped = {RELAY} if emits else {RELAY, EMITTING}
    return [
        (source, PurePosixPath(RUNTIME_PACKAGE) / relative)
        for source, relative in _tree(runtime_source())
        if (relative.stem not in NOT_RUN_BY_THE_FUNCTION or relative.stem in wanted)
        and not (relative.parent.name == "modes" and relative.stem in skipped_modes)
        and relative.stem not in skipped
    ]


def relay_files() -> list[tuple[Path, PurePosixPath]]:
    """The relay's module and the runtime's modules it imports (read from its import statements)."""
    source = runtime_source()
    found, pending = {"__init__", RELAY}, ["__init__", RELAY]
    while pending:
        for module in _runtime_imports(pending.pop()) - found:
            if (source / f"{module}.py").is_file():
                found.add(module)
                pending.append(module)
    return [(source / f"{name}.py", PurePosixPath(RUNTIME_PACKAGE) / f"{name}.py") for name in sorted(found)]


def stage_asset(
    code_directory: Path | None,
    include: Sequence[str],
    exclude: Sequence[str],
    target: Target,
    mode: Mode | None,
    emits: bool = False,
) -> tuple[str, list[PurePosixPath]]:
    """Copy the runtime (what ``mode`` runs, with the outbox when it ``emits``; the relay's when ``mode`` is
    None), the user's code and its installed requirements into a fresh directory; returns it and the files
    of the code directory left out that may be data (see :func:`left_out_note`).

    The directory lives until the process exits: CDK copies it into the cloud assembly at synth.
    """
    parts: dict[str, list[tuple[Path, PurePosixPath]]] = {}
    left_out: list[PurePosixPath] = []
    if code_directory is not None:
        requirements = code_directory / REQUIREMENTS
        installed_from: set[Path] = set()
        if requirements.is_file():
            parts["requirements"] = _tree(install_requirements(requirements, target))
            # Installed, never shipped, even when include names them: requirements files may name a private
            # index with its credentials.
            installed_from = set(requirement_files(requirements))
        shipped, unshipped = select_files(code_directory, include, exclude)
        names = {path.name for path in installed_from}
        root = code_directory

        def installed(relative: PurePosixPath) -> bool:
            return relative.name in names and (root / relative).resolve() in installed_from

        parts["code_directory"] = [(source, path) for source, path in shipped if not installed(path)]
        left_out = [path for path in unshipped if not installed(path)]
    wanted = _runtime_modules_imported(parts.get("code_directory", ()))
    parts["runtime"] = runtime_files(mode, wanted, emits)
    check_size(parts)
    staging = Path(tempfile.mkdtemp(prefix="idempotent-pipeline-asset-"))
    atexit.register(shutil.rmtree, staging, True)
    made: set[Path] = set()
    stripped = cache_root() / "runtime"
    for part, files in parts.items():  # later parts win: the runtime over everything
        for source, relative in files:
            destination = staging / relative
            if destination.parent not in made:
                destination.parent.mkdir(parents=True, exist_ok=True)
                made.add(destination.parent)
            _place(_without_docs_cached(source, stripped) if part == "runtime" else source, destination)
    return str(staging), left_out


def _without_docs_cached(source: Path, cache: Path) -> Path:
    """``source`` as the function runs it (:func:`without_docs` of a ``.py`` file), from ``cache`` by its
    content's hash: the first synth writes it, later ones link it."""
    if source.suffix != ".py":
        return source
    text = source.read_bytes()
    digest = hashlib.sha256(b"without_docs 1\0" + text).hexdigest()[:32]  # the stripping's version too
    cached = cache / f"{digest}.py"
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f".{cached.name}.{os.getpid()}")
        partial.write_text(without_docs(text.decode("utf-8")), encoding="utf-8")
        partial.replace(cached)  # whole or not at all: a concurrent synth never links half a file
    return cached


def without_docs(source: str) -> str:
    """``source`` without its docstrings and comments, each line where it was: the runtime as the function
    runs it is a third smaller zipped, and a traceback's line numbers are those of the package's source."""
    lines = source.splitlines(keepends=True)
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = body[0] if body else None
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)):
            continue
        start, end = first.lineno, first.end_lineno or first.lineno
        head, tail = lines[start - 1][: first.col_offset], lines[end - 1][first.end_col_offset :]
        if isinstance(first.value.value, str) and not head.strip() and not tail.strip():
            lines[start - 1 : end] = [head + '""\n'] + ["\n"] * (end - start)
    for token in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            lines[row - 1] = lines[row - 1][:column].rstrip() + "\n"
    return "".join(lines)


def _place(source: Path, destination: Path) -> None:
    """A hard link where the file system allows (no bytes copied), else a copy with the file's mode."""
    if destination.exists():
        destination.unlink()
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy(source, destination)
