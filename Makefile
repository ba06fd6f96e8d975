# idempotent-pipeline: the two commands a new user runs are `make deploy` and `make test`.
# Everything installs itself on first use: a Python venv in .venv/ and the pinned CDK CLI in node_modules/.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The local cloud's command line (the console script of this package).
LOCAL := $(VENV)/bin/idempotent-pipeline local
export PATH := $(abspath $(VENV))/bin:$(CURDIR)/node_modules/.bin:$(PATH)
# A long install prints its latest step every PROGRESS_SECONDS instead of staying silent.
PROGRESS_SECONDS ?= 10
# The suite runs on two workers, a module's tests on one worker, in order: modules whose tests share one
# deployment (a module-scoped fixture) deploy it once. (Not --dist loadgroup: with pytest 9.2, xdist 3.8's
# group marks are silently ignored and a module's tests were split across workers.)
PYTEST_ARGS ?= -n 2 --dist loadfile
# Node 20 is end-of-life; jsii prints a banner on every start unless these list the running major version.
NODE_MAJOR := $(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := $(NODE_MAJOR)
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := $(NODE_MAJOR)
export AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE := 1
export CDK_DISABLE_CLI_TELEMETRY := true

# Where `make deploy` goes: the local emulator by default; a real account with TARGET=aws,
# or when AWS_PROFILE is given on the command line (make deploy AWS_PROFILE=my-profile).
ifeq ($(origin AWS_PROFILE),command line)
TARGET ?= aws
endif
TARGET ?= local

.PHONY: help setup deploy destroy demo synth test test-floor wheel release-check lint bench clean

help:
	@echo "make deploy    deploy the reference stack (local emulator by default; TARGET=aws for a real account)"
	@echo "make test      install what is missing and run the whole test suite"
	@echo "make test-floor  the construct tests against the oldest aws-cdk-lib supported (part of make test)"
	@echo "make wheel     build the wheel into dist/ (no venv, no Node: pip builds it in an isolated environment)"
	@echo "make release-check  build dist/ (sdist + wheel) and check it: twine, contents, install next to the floor"
	@echo "make destroy   destroy the stack and stop the local emulator"
	@echo "make integ     the integration tests on a real account: make integ AWS_PROFILE=... (deploys, asserts, destroys)"
	@echo "make synth     synthesize the reference stack into cdk.out/ for review"
	@echo "make bench     run the benchmarks, write benchmarks/results.{json,md,png} and nag_eval.{json,md}"
	@echo "make lint      ruff and mypy"

setup: $(VENV)/.installed node_modules/.installed

# $(call with_progress,COMMAND,LOG): run COMMAND with its output in LOG; every PROGRESS_SECONDS, when its latest
# step (pip's "Collecting ...", npm's last line) is a new one, print how long it has run and that step; a step
# that lasts (pip installing what it collected) is printed once, then said to go on every 6 x PROGRESS_SECONDS,
# with the time it has taken so far. On failure print the whole log.
define with_progress
	{ $(1); } > $(2) 2>&1 & pid=$$!; ticks=0; last=; since=0; \
	while kill -0 $$pid 2>/dev/null; do \
		sleep 1; ticks=$$((ticks + 1)); \
		if [ $$((ticks % $(PROGRESS_SECONDS))) -eq 0 ] && kill -0 $$pid 2>/dev/null; then \
			step=$$(grep -E '^(Collecting|Downloading|Building|Installing|Successfully|added|npm)' $(2) | tail -n 1 | cut -c 1-80); \
			step=$${step:-working}; \
			if [ "$$step" != "$$last" ]; then \
				echo "    $${ticks} s: $$step"; last=$$step; since=$$ticks; \
			elif [ $$(((ticks - since) % ($(PROGRESS_SECONDS) * 6))) -eq 0 ]; then \
				echo "    $${ticks} s: still the step above ($$((ticks - since)) s)"; \
			fi; \
		fi; \
	done; \
	wait $$pid || { cat $(2); echo "failed (log: $(2))"; exit 1; }
endef

PIP_INSTALL = $(PY) -m pip install --upgrade pip && $(PY) -m pip install -e ".[dev,local,bench]"
NPM_INSTALL = npm ci --no-audit --no-fund --loglevel=error

$(VENV)/.installed: pyproject.toml
	@echo "==> creating the Python environment in $(VENV)/ (pip install -e .[dev,local,bench], a few minutes the first time)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(call with_progress,$(PIP_INSTALL),$(VENV)/install.log)
	@touch $@

# The floor environment: the oldest aws-cdk-lib and constructs pyproject.toml accepts (its `>=` bounds, pinned)
# with the cdk-nag 2 that installs next to them, for the construct tests only (the code is this checkout's).
FLOOR_VENV ?= .venv-floor
FLOOR_PY := $(FLOOR_VENV)/bin/python
FLOOR_PINS = $(shell $(PYTHON) -c 'import re, tomllib; \
	deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]; \
	print(*(re.sub(r">=([^,]+).*", r"==\1", d) for d in deps if d.startswith(("aws-cdk-lib", "constructs"))))')
FLOOR_INSTALL = $(FLOOR_PY) -m pip install $(FLOOR_PINS) "cdk-nag<3" "pytest>=8" "pytest-xdist>=3.5"
FLOOR_PYTEST_ARGS ?= -n 2 --dist loadfile tests/constructs

$(FLOOR_VENV)/.installed: pyproject.toml
	@echo "==> creating the floor environment in $(FLOOR_VENV)/ ($(FLOOR_PINS), cdk-nag 2; about a minute)"
	@test -x $(FLOOR_PY) || $(PYTHON) -m venv $(FLOOR_VENV)
	@$(call with_progress,$(FLOOR_INSTALL),$(FLOOR_VENV)/install.log)
	@touch $@

node_modules/.installed: package.json package-lock.json
	@echo "==> installing the pinned CDK CLI into node_modules/ (npm ci)"
	@mkdir -p $(VENV)
	@$(call with_progress,$(NPM_INSTALL),$(VENV)/npm-install.log)
	@touch $@

ifeq ($(TARGET),aws)
deploy: setup
	@echo "==> deploying to the AWS account of $${AWS_PROFILE:-the default credentials}"
	npx cdk deploy --all
destroy: setup
	npx cdk destroy --all
else
deploy: setup
	@$(LOCAL) deploy --demo
destroy: setup
	@$(LOCAL) destroy
endif

demo: setup
	@$(LOCAL) demo

synth: setup
	npx cdk synth --quiet
	@echo "==> templates are in cdk.out/"

test: setup $(FLOOR_VENV)/.installed
	$(PY) -m pytest $(PYTEST_ARGS)
	@echo "==> the construct tests against the floor: $(FLOOR_PINS)"
	$(FLOOR_PY) -m pytest $(FLOOR_PYTEST_ARGS)

test-floor: setup $(FLOOR_VENV)/.installed
	$(FLOOR_PY) -m pytest $(FLOOR_PYTEST_ARGS)

# The wheel alone, for installing the package elsewhere (README "Your own app"): pip builds it with the
# build-system of pyproject.toml in an isolated environment; nothing of `make setup` is needed.
wheel:
	$(PYTHON) -m pip wheel --no-deps --quiet --wheel-dir dist .
	@ls dist/*.whl

# The release: a clean sdist and wheel in dist/ (the venv's setuptools and wheel, no download), then
# tests/release/: twine check, contents and metadata, and an install by name next to an app pinned to the floor.
release-check: setup
	rm -rf dist build
	$(PY) -m build --no-isolation --outdir dist . > $(VENV)/build.log 2>&1 || { cat $(VENV)/build.log; exit 1; }
	@ls dist
	RELEASE_CHECK_DIST=dist $(PY) -m pytest tests/release -n 0 -p no:cacheprovider

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy idempotent_pipeline lambda_src/idempotent_runtime idempotent_local idempotent_nag idempotent_cli

bench: setup
	$(PY) benchmarks/run.py
	$(PY) -m benchmarks.nag_eval > /dev/null

# The integration tests (integ/integ_*.py, README "Proof on a real account"). `make test` checks their
# snapshots offline; `make integ-snapshots` rewrites the snapshots that changed; `make integ` deploys every
# test to the account of AWS_PROFILE (or the current credentials), runs its assertions and destroys it
# (INTEG_ARGS="integ_guarded --keep": one test, stacks left for a look).
.PHONY: integ integ-snapshots
integ-snapshots: setup
	$(PY) integ/harness.py snapshots

integ: setup
	$(PY) integ/harness.py deploy $(INTEG_ARGS)

clean:
	rm -rf cdk.out build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache
