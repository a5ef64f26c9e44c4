# choudoufu-live: build, test, demo.
SHELL := /bin/bash
CARGO ?= cargo
export CHECKPOINT_DISABLE := 1

.PHONY: all build test demo lint clean prove-claims fuzz reliability bench

all: build

build:
	$(CARGO) build

## make test: every test, with its peers (moto_server for S3 and IAM, azurite for Azure Blob Storage,
## gcp-storage-emulator for GCS) installed if missing, started on free loopback ports and stopped after;
## scripts/test builds every test once, then runs the terraform-heavy `run` beside the other binaries.
test:
	CARGO=$(CARGO) scripts/with-peers scripts/test

## make demo: two terraform applies on one root at once, on the local record store; no cloud needed.
demo: build
	scripts/demo

## make prove-claims [CLAIMS="id ..."]: each claim's test as is and with its mechanism cut out; rewrites docs/claims.md.
prove-claims:
	scripts/with-moto scripts/prove-claims $(CLAIMS)

## make fuzz: the cargo-fuzz targets, FUZZ_SECONDS each (default 60).
fuzz:
	scripts/fuzz

## make reliability: the long load run and the kill suite, with their figures; the kill rounds on a chained AWS apply
## (run, terraform or the plugins SIGKILLed at random, ten rounds: CHOUDOUFU_AWS_KILL_ROUNDS); the AWS door races,
## three rounds each; the AWS pairs created together, six rounds; an s3-backend root's workspaces with the real AWS provider.
reliability:
	scripts/with-moto $(CARGO) test --test reliability --test plugin -- --ignored --nocapture
	CHOUDOUFU_AWS_RACE_ROUNDS=3 scripts/with-moto $(CARGO) test --test run door_races -- --nocapture
	CHOUDOUFU_MARKER_ROUNDS=6 scripts/with-moto $(CARGO) test --test run door_pairs::pairs_created_together -- --nocapture
	scripts/with-moto $(CARGO) test --test run s3_backend::aws_ -- --ignored --nocapture

## make bench: side by side with terraform's own S3 backend: SeaweedFS behind a 20 ms-per-request proxy (the S3
## latency model), and moto; writes docs/bench/RESULTS.md and chart.png (about 30 minutes from a fresh clone on 2 cores, the build included; B6/5000's stock plan on moto is 8 of them).
bench:
	scripts/bench

lint:
	scripts/check-layers
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf .venv node_modules
