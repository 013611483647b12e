# groundproxy — the two commands a newcomer runs: `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch is pinned to its CPU build: from a local wheel folder where the machine has one,
# else from PyTorch's CPU index.
TORCH_SOURCE ?= $(if $(wildcard /opt/wheels/torch-*),--find-links /opt/wheels,--extra-index-url https://download.pytorch.org/whl/cpu)
export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

SRC := errors proxy guards retrieval models policies testing integrations training tests bench docs

.PHONY: install demo test fast lint typecheck unit wheel-check lock litellm-venv browser-deps node-deps docs

$(VENV)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q pip==26.3 setuptools==84.2.1 wheel==0.48.0
	$(PY) -m pip install -q $(TORCH_SOURCE) -r requirements.lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

# The package as every tool sees it: setuptools maps groundproxy.X to the folder X/ (one import
# root, fixed top-level folders), which only the import system's editable finder follows.
# .gp-root/groundproxy (committed: a link to this folder) is that package as a plain
# directory, and a .pth file puts .gp-root on the venv's path — so mypy, IDEs and tools that
# read imports (import-linter, pydeps …) find groundproxy.* where the code is, nothing by hand.
# A worktree that sets PYTHONPATH=<its>/.gp-root still comes first.
GP_PTH := $(VENV)/.gp-root.pth-installed
$(GP_PTH): $(VENV)/.installed .gp-root/groundproxy
	echo "$(CURDIR)/.gp-root" > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/groundproxy-checkout.pth"
	touch $@

install: $(VENV)/.installed $(GP_PTH)

# The LiteLLM proxy the integration test runs against: its own venv, pinned (never imported by
# groundproxy; the test starts its `litellm` binary). Takes a few minutes the first time.
LITELLM_VENV ?= .venv-litellm
LITELLM_PIN  ?= litellm[proxy]==1.108.7
$(LITELLM_VENV)/.installed:
	$(PYTHON) -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install -q '$(LITELLM_PIN)'
	touch $@

litellm-venv: $(LITELLM_VENV)/.installed

demo: install
	$(VENV)/bin/groundproxy demo

lint: install
	$(VENV)/bin/ruff check $(SRC)
	$(VENV)/bin/ruff format --check $(SRC)
	$(VENV)/bin/hadolint Dockerfile

# Committed; made again only for a checkout that did not create links (core.symlinks=false).
.gp-root/groundproxy:
	mkdir -p .gp-root && ln -sfn .. .gp-root/groundproxy

typecheck: install
	$(VENV)/bin/mypy

# The verdict inspector's browser test (tests/e2e/test_inspector_browser.py) drives Debian's
# chromium through chromium-driver; it fails (never skips) without them. CI runs as root.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
browser-deps:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		echo "installing chromium + chromium-driver (apt-get)"; \
		$(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium chromium-driver; \
	fi

# The openai Node SDK test (tests/e2e/test_node_sdk.py) runs tests/node/sdk.test.mjs with node
# and the npm packages pinned in tests/node/package-lock.json (npm ci, again when the lock
# changes); it fails (never skips) without them. Debian's nodejs + npm when node is missing.
NODE_TESTS := tests/node
$(NODE_TESTS)/node_modules/.installed: $(NODE_TESTS)/package.json $(NODE_TESTS)/package-lock.json
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "installing nodejs + npm (apt-get)"; \
		$(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q nodejs npm; \
	fi
	cd $(NODE_TESTS) && npm ci --no-audit --no-fund
	touch $@

node-deps: $(NODE_TESTS)/node_modules/.installed

# pytest exits 5 when it collects no test: that is a failure here, said plainly.
unit: install litellm-venv browser-deps node-deps
	$(PY) -m pytest -q -p no:cacheprovider; s=$$?; \
	if [ $$s -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$s

# The shipped artefact: build the wheel, install it into a new venv outside the repository,
# run the Dockerfile's ENTRYPOINT + CMD from it and send one guarded request (openai SDK).
wheel-check: install
	$(PY) tests/wheel_check.py

# The lane to run while working: no real processes, no model builds (under a minute).
fast: install
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow"

# The documentation site (docs/, mkdocs.yml; mkdocs-material pinned in requirements.lock), built
# strictly into the ignored site/: a broken link or anchor, a page missing from the nav or an
# unknown generated block fails it. Its generated blocks (policy reference, module map, bench
# tables) are made from the code at build time: docs/_hooks/generate.py.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict  # not --quiet: it hides the warnings strict counts

test: lint typecheck docs unit wheel-check

lock:
	$(PY) -m pip freeze --exclude-editable | grep -v '^groundproxy' > requirements.lock
