"""The emulator's process: the services it runs in moto's server, handed to the core
(:mod:`idempotent_local.emulator`), which installs them in this order before the first request and again
once its port is known. A new service is one more entry of :data:`SERVICES`; the core never imports one."""

from __future__ import annotations

from pathlib import Path

from idempotent_local import cloudformation, control_api, emulator, patches

SERVICES: tuple[emulator.Service, ...] = (cloudformation.SERVICE, patches.SERVICE, control_api.SERVICE)


def install(endpoint: str | None = None) -> None:
    """Teach this process's moto what the emulator does (a test process serving moto itself calls it)."""
    emulator.install(SERVICES, endpoint)


def serve(state_dir: Path | str, *, port: int = 0, announce: bool = True) -> None:
    """Run the emulator with its services until SIGTERM or Ctrl-C (the body of ``local serve``)."""
    emulator.serve(state_dir, SERVICES, port=port, announce=announce)


__all__ = ["SERVICES", "install", "serve"]
