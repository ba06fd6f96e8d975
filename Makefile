# idempotent-pipeline: the two commands a new user runs are `make deploy` and `make test`.
# Everything installs itself on first use: a Python venv in .venv/ and the pinned CDK CLI in node_modules/.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
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

.PHONY: help setup deploy destroy demo synth test lint bench clean

help:
	@echo "make deploy    deploy the reference stack (local emulator by default; TARGET=aws for a real account)"
	@echo "make test      install what is missing and run the whole test suite"
	@echo "make destroy   destroy the stack and stop the local emulator"
	@echo "make synth     synthesize the reference stack into cdk.out/ for review"
	@echo "make bench     run the benchmarks, write benchmarks/results.{json,md,png}"
	@echo "make lint      ruff and mypy"

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: pyproject.toml
	@echo "==> creating the Python environment in $(VENV)/"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# pip's and setuptools' chatter goes to a log, shown only when the install fails.
	@{ $(PY) -m pip install --upgrade pip && $(PY) -m pip install -e ".[dev,local,bench]"; } \
		> $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; echo "pip install failed (log: $(VENV)/install.log)"; exit 1; }
	@touch $@

node_modules/.installed: package.json package-lock.json
	@echo "==> installing the pinned CDK CLI into node_modules/"
	@npm ci --no-audit --no-fund --loglevel=error
	@touch $@

ifeq ($(TARGET),aws)
deploy: setup
	@echo "==> deploying to the AWS account of $${AWS_PROFILE:-the default credentials}"
	npx cdk deploy --all
destroy: setup
	npx cdk destroy --all
else
deploy: setup
	@$(PY) -m idempotent_local deploy
destroy: setup
	@$(PY) -m idempotent_local destroy
endif

demo: setup
	@$(PY) -m idempotent_local demo

synth: setup
	npx cdk synth --quiet
	@echo "==> templates are in cdk.out/"

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy idempotent_pipeline lambda_src/idempotent_runtime

bench: setup
	$(PY) benchmarks/run.py

clean:
	rm -rf cdk.out build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache
