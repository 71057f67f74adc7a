# insitu: the two commands a newcomer needs are `make demo` and `make test`.
CARGO ?= cargo
DEMO_DATA ?= target/insitu-demo

.PHONY: help toolchain build release test lint fmt demo bench clean

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

toolchain: ## Check that the Rust toolchain is there (rustup's stable, 1.85 or newer)
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust with rustup (https://rustup.rs), then re-run"; exit 1; }
	@$(CARGO) --version

build: toolchain ## Debug build of every crate
	$(CARGO) build --workspace

release: toolchain ## Optimised build of the insitu binary (target/release/insitu)
	$(CARGO) build --release -p insitu-cli

test: toolchain ## Format check, clippy, docs, and every test (the CLI suite over both device transports)
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --workspace
	$(CARGO) test --workspace
	INSITU_TRANSPORT=process $(CARGO) test -p insitu-cli

lint: toolchain ## Format check, clippy and docs only
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --workspace

fmt: toolchain ## Format the code
	$(CARGO) fmt --all

demo: release ## Build an array, store a corpus, search it in the devices and on the host
	./target/release/insitu demo --data $(DEMO_DATA)

bench: release ## Whole-system benchmarks against peers (installs ripgrep); see bench/README.md
	bash bench/run.sh

clean: ## Remove build output and demo data
	$(CARGO) clean
