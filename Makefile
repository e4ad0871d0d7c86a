# Stratus. `make demo` runs the main job on the embedded default; `make test`
# passes the tests. Both work on a fresh clone (see README.md).
GO      ?= go
BIN     := bin/stratus
SCRATCH ?= .scratch/demo


.PHONY: all build demo test test-go fuzz vet lint-asl lint-cfn statemachines bench clean

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
	@find $(SCRATCH)/workspace -type f | sort | sed 's/^/  /'
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

test: vet lint-asl lint-cfn test-go fuzz

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin .scratch
