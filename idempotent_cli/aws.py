"""The AWS clients of one command: a real account (boto3's default credential chain) or the local emulator.

Without ``--local`` the tool uses boto3's default session: credentials and region from the environment,
``~/.aws`` (``--profile``), SSO or an instance role, and ``AWS_ENDPOINT_URL`` when it is set. With
``--local`` every client points at the emulator that runs for the app directory, found as the ``local``
commands find it (:func:`idempotent_local.location.locate`: ``--app-dir``, else the nearest directory with a
``cdk.json``; the tool keeps no copy of where the state lives), with the emulator's fake credentials.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from idempotent_cli.errors import DlqError


@dataclass
class Clients:
    """One client per service, created on first use. ``where`` says which cloud, for messages; ``state_dir``
    is the local emulator's state directory (None: an account); ``read``: the stacks a command has read
    (:func:`idempotent_cli.stack.deployed`), by name."""

    factory: Callable[[str], Any]
    where: str
    region: str
    state_dir: Path | None = None
    read: dict[str, Any] = field(default_factory=dict)
    _made: dict[str, Any] = field(default_factory=dict)

    def __call__(self, service: str) -> Any:
        if service not in self._made:
            self._made[service] = self.factory(service)
        return self._made[service]


def connect(
    *,
    local: bool,
    app_dir: str | Path | None = None,
    state_dir: str | Path | None = None,
    profile: str | None = None,
    region: str | None = None,
) -> Clients:
    """Clients for the emulator of the app (``local``) or for the default credential chain."""
    if local:
        return _local(app_dir, state_dir)
    return _account(profile, region)


def _account(profile: str | None, region: str | None) -> Clients:
    import boto3
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    try:
        session = boto3.session.Session(profile_name=profile, region_name=region)
    except ProfileNotFound as exc:
        raise DlqError(f"{exc} (--profile {profile})") from None
    if not session.region_name:
        raise DlqError(
            "no AWS region is configured: set AWS_DEFAULT_REGION (or a region in ~/.aws/config), or pass "
            "--region; for the local emulator pass --local"
        )
    try:
        credentials = session.get_credentials()
    except BotoCoreError as exc:
        raise DlqError(f"cannot load AWS credentials: {exc}") from None
    if credentials is None:
        raise DlqError(
            "no AWS credentials found (environment, ~/.aws, SSO or instance role): sign in, or pass "
            "--profile NAME; for the local emulator pass --local"
        )
    where = f"region {session.region_name}" + (f", profile {profile}" if profile else "")
    return Clients(factory=session.client, where=where, region=session.region_name)


def _local(app_dir: str | Path | None, state_dir: str | Path | None) -> Clients:
    from idempotent_local.extra import MissingExtra, require_moto

    try:
        # Without moto no emulator can run: say what to install, not that none is running.
        require_moto()
        from idempotent_local import emulator as emulators
        from idempotent_local.location import NoApp, locate
    except MissingExtra as exc:
        raise DlqError(f"--local: {exc}") from None
    except ImportError as exc:
        raise DlqError(
            f"--local needs the local emulator, which is not installed ({exc}): install the `local` extra"
        ) from None
    try:
        where = locate(
            str(app_dir) if app_dir is not None else None, str(state_dir) if state_dir is not None else None
        )
    except NoApp as exc:
        raise DlqError(str(exc)) from None
    running = emulators.find(where.state_dir)
    if running is None:
        raise DlqError(
            f"no local emulator is running for {where.describe()} (no live state in {where.state_dir}): run "
            "`idempotent-pipeline local deploy` in that directory first, or pass --app-dir"
        )
    return Clients(
        factory=running.client,
        where=f"the local emulator on {running.endpoint} (app {where.describe()})",
        region=emulators.REGION,
        state_dir=where.state_dir,
    )
