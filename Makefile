# choudoufu-live: build, test, demo.
SHELL := /bin/bash
CARGO ?= cargo
export CHECKPOINT_DISABLE := 1

.PHONY: all build test demo lint clean

all: build

build:
	$(CARGO) build

## make test: every test, with its peers (moto_server for S3 and IAM, azurite for Azure Blob Storage,
## gcp-storage-emulator for GCS) installed if missing, started on free loopback ports and stopped after.
test:
	scripts/with-peers $(CARGO) test --no-fail-fast

## make demo: two terraform applies on one root at once, on the local record store; no cloud needed.
demo: build
	scripts/demo

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf .venv node_modules
