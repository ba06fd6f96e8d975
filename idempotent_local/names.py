"""The local cloud's names and fixed values, said once: the core, its services and the tools all read them
from here (this module imports nothing of the package: it is the bottom layer)."""

from __future__ import annotations

from pathlib import Path

ACCOUNT_ID = "000000000000"
REGION = "us-east-1"
DEFAULT_STATE_DIR = Path(".local-cloud")
STATE_FILE = "state.json"
LOG_FILE = "emulator.log"
# The emulator process's own state directory (durable functions keep their code and logs there; set by serve).
STATE_DIR_VARIABLE = "IDEMPOTENT_LOCAL_STATE_DIR"
# How a stack event that is a note of the emulator (what it does not model) begins its reason.
NOTE_PREFIX = "Emulator note: "
# A process id: an emulator started with this variable set stops when that process ends, however it ends
# (killed by a timeout, SIGTERM, Ctrl-C). The test suite sets it to itself; `local deploy` leaves it unset,
# its emulator outlives it.
OWNER_VARIABLE = "IDEMPOTENT_PIPELINE_EMULATOR_OWNER"
# Where the emulator's own control API answers, beside moto's (``/moto-api/...``).
CONTROL_PATH = "/moto-api/local-cloud"

# Fake credentials: the emulator accepts any; real ones must never reach it (or leave this machine).
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local-cloud",
    "AWS_SECRET_ACCESS_KEY": "local-cloud",
}
