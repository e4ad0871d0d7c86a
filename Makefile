# Stratus. `make demo` runs the main job on the embedded default; `make test`
# passes the tests. Both work on a fresh clone (see README.md).
GO      ?= go
BIN     := bin/stratus
SCRATCH ?= .scratch/demo


.PHONY: all build demo test test-go fuzz vet lint-asl lint-cfn lint-shell statemachines bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/stratus

## demo: install into a scratch dir and run the example task through the
## built-in implementation flow with the script engine (review loop runs twice).
demo: build
	rm -rf $(SCRATCH) && mkdir -p $(SCRATCH)
	$(BIN) install --dir $(SCRATCH) --primary script --scenario examples/scenario.yaml
	cp examples/task.md $(SCRATCH)/task.md
	$(BIN) run $(SCRATCH)/task.md --dir $(SCRATCH)
	@echo
	@echo "ctx files (what each step left for the next):"
	@find $(SCRATCH)/workspace -type f ! -name .stratus-ctx | sort | sed 's/^/  /'
	@echo "summary:"
	@ls $(SCRATCH)/.stratus/logs/*/summary.* | sed 's/^/  /'

## statemachines: regenerate statemachine/<flow>.asl.json from the built-in
## flows and statemachine/worc/<task_type>.asl.json from worc's peer flows
## (compiled structurally: their role files, tools and config need not be
## here). Without $(PEER_FLOWS) the peer files are left as they are.
PEER_FLOWS ?= ../shared/peers/worc/flows
statemachines:
	rm -f statemachine/*.asl.json
	$(GO) run ./cmd/stratus compile --builtin --all --out-dir statemachine
	@if [ -d $(PEER_FLOWS) ]; then \
	  rm -f statemachine/worc/*.asl.json && \
	  $(GO) run ./cmd/stratus compile --all --structural --flows $(PEER_FLOWS) --out-dir statemachine/worc; \
	else \
	  echo "statemachines: $(PEER_FLOWS) not found: worc peer flows skipped, statemachine/worc/ left as is"; \
	fi

node_modules/.bin/asl-validator: package.json
	npm install --no-audit --no-fund
	touch $@

lint-asl: node_modules/.bin/asl-validator
	@for f in statemachine/*.asl.json statemachine/worc/*.asl.json; do \
	  [ -e "$$f" ] || continue; \
	  node_modules/.bin/asl-validator --json-path $$f || exit 1; \
	done

lint-cfn:
	cfn-lint template.yaml

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

vet:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test-go:
	$(GO) test -race -count=1 ./...

## fuzz: run each fuzz target for FUZZTIME (seeded from ../shared/cases);
## go test takes one target per -fuzz run. `make test` runs it after test-go.
# A count, not a duration: a time-bounded run can end mid-input and report
# "context deadline exceeded" as a failure.
FUZZTIME ?= 1000x
FUZZ     = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzz
fuzz:
	$(FUZZ) '^FuzzFold_Value$$' ./internal/fold
	$(FUZZ) '^FuzzCheckPartName$$' ./internal/projection
	$(FUZZ) '^FuzzProjection_RoundTrip$$' ./internal/projection
	$(FUZZ) '^FuzzVerify$$' ./internal/captoken
	$(FUZZ) '^FuzzWorkerAPI$$' ./internal/httpapi
	$(FUZZ) '^FuzzEventLine$$' ./internal/contract

test: vet lint-asl lint-cfn lint-shell test-go fuzz

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin .scratch

## ---- AWS: Lambda artifacts, SAM, LocalStack (functions/, template.yaml, localstack/)
.PHONY: lambdas sam-build deploy localstack-up localstack-deploy localstack-down lint-aws

## lambdas: build each functions/<name> as $(LAMBDA_DIR)/<name>/bootstrap for
## provided.al2023 on arm64, statically linked (functions/build_test.go builds
## them through this target and checks the artifacts).
LAMBDA_DIR ?= bin/lambda
LAMBDAS    := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
LAMBDA_ENV := GOOS=linux GOARCH=arm64 CGO_ENABLED=0
LAMBDA_GOFLAGS := -tags=lambda.norpc -trimpath -ldflags=-s
lambdas:
	@for f in $(LAMBDAS); do \
	  echo "lambdas: functions/$$f -> $(LAMBDA_DIR)/$$f/bootstrap"; \
	  $(LAMBDA_ENV) $(GO) build $(LAMBDA_GOFLAGS) -o $(LAMBDA_DIR)/$$f/bootstrap ./functions/$$f || exit 1; \
	done

## sam-build: `sam build` (SAM's go1.x builder, one CodeUri per function) with
## the same environment and flags as `lambdas`. SAM=samlocal for LocalStack.
SAM ?= sam
SAM_BUILD_FLAGS ?=
sam-build:
	$(LAMBDA_ENV) GOFLAGS='$(LAMBDA_GOFLAGS)' $(SAM) build --template template.yaml $(SAM_BUILD_FLAGS)

## deploy: build and deploy the stack to the AWS account of your credentials
## (guided the first time, then from the samconfig.toml it wrote). The runner
## image must be in ECR first: see README.md ("AWS").
SAM_DEPLOY_FLAGS ?= $(if $(wildcard samconfig.toml),,--guided)
deploy: sam-build
	$(SAM) deploy $(SAM_DEPLOY_FLAGS)

## localstack-up / localstack-deploy / localstack-down: the stack on LocalStack
## (needs Docker and LOCALSTACK_AUTH_TOKEN; see localstack/README.md).
localstack-up:
	docker compose -f localstack/docker-compose.yml up -d --wait
localstack-deploy:
	localstack/deploy.sh
localstack-down:
	docker compose -f localstack/docker-compose.yml down

## lint-aws: static checks of what cannot run here: shellcheck on the
## LocalStack scripts, and the Go tests that parse the compose file and the
## samconfig (localstack/) and check the template against the code (functions/).
lint-aws:
	shellcheck localstack/*.sh localstack/init/ready.d/*.sh
	$(GO) test -count=1 -run '^(TestLocalStack|TestTemplate)' ./localstack/ ./functions/

## lint-shell: shellcheck the LocalStack scripts (they cannot run here: no Docker).
lint-shell:
	shellcheck localstack/*.sh localstack/init/ready.d/*.sh
