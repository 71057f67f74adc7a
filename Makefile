# insitu: the two commands a newcomer needs are `make demo` and `make test`.
CARGO ?= cargo
PYTHON ?= python3
DEMO_DATA ?= target/insitu-demo
# The Python package's virtual environment (made by `make python`; nothing is installed outside it).
VENV ?= .venv
VENV_PY := $(VENV)/bin/python
PY_DEPS := "maturin>=1.9.4,<2" pytest "pyarrow>=14" numpy duckdb tqdm "ray>=2.9"

.PHONY: help toolchain build release test lint fmt demo bench clean python pytest

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

toolchain: ## Check that the Rust toolchain is there (rustup's stable, 1.89 or newer)
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust with rustup (https://rustup.rs), then re-run"; exit 1; }
	@$(CARGO) --version

build: toolchain ## Debug build of every crate
	$(CARGO) build --workspace

release: toolchain ## Optimised build of the insitu binary (target/release/insitu)
	$(CARGO) build --release -p insitu-cli

test: toolchain ## Format check, clippy, docs, every Rust test (the CLI suite over both device transports), the Python tests
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --workspace
	$(CARGO) test --workspace
	INSITU_TRANSPORT=process $(CARGO) test -p insitu-cli
	$(MAKE) pytest

$(VENV)/.installed: pyproject.toml Makefile
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: install Python 3.9 or newer (apt install python3 python3-venv)"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || { echo "could not make a virtual environment: apt install python3-venv, then re-run"; exit 1; }
	$(VENV_PY) -m pip install -q --disable-pip-version-check $(PY_DEPS)
	@touch $@

python: toolchain $(VENV)/.installed ## Build the Python package (debug) into the venv under the repo: .venv/bin/python -c "import insitu"
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop -q

pytest: python ## The Python tests (tests/python), against the CLI built by cargo
	$(CARGO) build -q -p insitu-cli
	INSITU_BIN=$(abspath target/debug/insitu) $(VENV_PY) -m pytest tests/python -q

lint: toolchain ## Format check, clippy and docs only
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --workspace

fmt: toolchain ## Format the code
	$(CARGO) fmt --all

demo: release ## Build an array, store a corpus, search it in the devices and on the host; then the same from Python
	./target/release/insitu demo --data $(DEMO_DATA)
	$(MAKE) python
	rm -rf $(DEMO_DATA)-py && mkdir -p $(DEMO_DATA)-py
	$(VENV_PY) examples/python_tour.py $(DEMO_DATA)-py

bench: release ## Whole-system benchmarks against peers (installs ripgrep); see bench/README.md
	bash bench/run.sh

clean: ## Remove build output, demo data and the Python venv
	$(CARGO) clean
	rm -rf $(VENV) python/insitu/*.so
