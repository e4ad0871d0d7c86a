# Stratus. `make demo` runs the main job on the embedded default; `make test`
# passes the tests. Both work on a fresh clone (see README.md).
GO      ?= go
BIN     := bin/stratus
SCRATCH ?= .scratch/demo
# What `stratus --version` names: the commit (and "+dirty") built from, and
# the version: the nearest tag (git describe: v1.2.3 at it, v1.2.3-4-gabc…
# past it, -dirty for uncommitted changes); without a tag, the binary's
# build info gives one.
COMMIT  := $(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo +dirty)
VERSION := $(shell git describe --tags --dirty 2>/dev/null)
LDFLAGS := -X main.commit=$(COMMIT) -X main.version=$(VERSION)


.PHONY: all build demo demo-aws demo-aws-pool demo-aws-claude demo-aws-codex demo-aws-agents demo-claude demo-codex image test test-image deps test-go fuzz vet lint-asl lint-cfn lint-shell statemachines bench bench-scale clean

all: build

## build: bin/stratus slim (-tags slim: without the AWS SDK and the run
## viewer, it starts fast), bin/stratus-full beside it (the
## whole CLI: bin/stratus hands it --target aws, dev aws and ui), and the
## small runner.
build:
	@echo "== build: $(BIN) (a cold Go cache downloads the modules first: a few minutes)"
	$(GO) build -tags slim -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/stratus
	$(GO) build -ldflags "$(LDFLAGS)" -o $(dir $(BIN))stratus-full ./cmd/stratus
	$(GO) build -o $(dir $(BIN))stratus-runner ./cmd/stratus-runner

## demo: install into a scratch dir and run the example task through the
## built-in implementation flow with the script engine (review loop runs twice).
demo: build
	rm -rf $(SCRATCH) && mkdir -p $(SCRATCH)
	$(BIN) install --dir $(SCRATCH)/project --primary script --scenario examples/scenario.yaml
	cp examples/task.md $(SCRATCH)/task.md
	@# The project is a git repository whose origin is a bare repository
	@# beside it, served as GitHub repository demo/greeting by a stand-in of
	@# GitHub's API on 127.0.0.1 (stratus dev github): the run's publish step
	@# pushes the task branch there and opens a pull request.
	git init -q --bare $(SCRATCH)/origin.git
	@$(BIN) dev github --repo demo/greeting=$(CURDIR)/$(SCRATCH)/origin.git --token demo-token --url-file $(SCRATCH)/github.url \
	  > $(SCRATCH)/github.log 2>&1 & pid=$$!; trap 'kill $$pid 2>/dev/null; wait $$pid 2>/dev/null' EXIT; \
	  for i in $$(seq 100); do [ -s $(SCRATCH)/github.url ] && break; sleep 0.1; done; \
	  [ -s $(SCRATCH)/github.url ] || { cat $(SCRATCH)/github.log; exit 1; }; \
	  printf 'git:\n  api_url: %s\n  repository: demo/greeting\n' "$$(cat $(SCRATCH)/github.url)" >> $(SCRATCH)/project/.stratus/config.yaml; \
	  echo "git: $(SCRATCH)/project, origin $(SCRATCH)/origin.git, served at $$(cat $(SCRATCH)/github.url)"; \
	  git -C $(SCRATCH)/project init -q -b main && git -C $(SCRATCH)/project add -A && \
	  git -C $(SCRATCH)/project -c user.name=demo -c user.email=demo@example.invalid commit -qm "the project before the run" && \
	  git -C $(SCRATCH)/project remote add origin ../origin.git && git -C $(SCRATCH)/project push -q origin main && \
	  GITHUB_TOKEN=demo-token $(BIN) run $(SCRATCH)/task.md --dir $(SCRATCH)/project
	@echo
	@echo "ctx files (what each step left for the next):"
	@find $(SCRATCH)/project/.stratus/ctx -type f ! -name .stratus-ctx | sort | sed 's/^/  /'
	@echo "summary:"
	@ls $(SCRATCH)/project/.stratus/logs/*/summary.* | sed 's/^/  /'
	@echo "the pushed branch on origin (the run's commits, then the orchestrator's audit commit):"
	@git -C $(SCRATCH)/origin.git log --format='  %h %an: %s' main..stratus/demo-greeting

## demo-claude, demo-codex: the example task through the built-in
## implementation flow with the real Claude Code / Codex CLI (npm, as
## package.json pins them) against the scripted model server on 127.0.0.1
## (stratus engine modelserver --script examples/modelserver.yaml): no key,
## no network. The CLIs' own tool calls write cmd/hello/main.go.
demo-claude demo-codex: build
	examples/demo-cli.sh $(patsubst demo-%,%,$@) .scratch/$@ $(BIN)

## demo-aws: the main job on a local AWS stand-in, with no account (stratus
## dev aws): template.yaml deployed on moto as sam deploy would, the Lambda
## functions' bootstraps (make lambdas) under the Lambda Runtime Interface
## Emulator (make rie), and every step a container of the runner image
## (make image; podman or Docker): a run of examples/task.md with --target
## aws, whose file change travels through the steps and comes back as a
## branch; a second run interrupted (stratus cancel) and resumed (stratus
## resume); then status and runs. It names the container and image of each
## step, and when the stand-in stops, each function's cold starts and
## memory (the emulator's REPORT lines) and each task's start to its first
## worker API call. Needs moto and the SAM translator (pip install
## 'moto[server]==5.2.1' aws-sam-translator) and a container engine.
DEMO_AWS ?= .scratch/demo-aws
demo-aws: build lambdas rie
	@python3 -c 'import moto, flask_cors' 2>/dev/null || { echo "demo-aws needs moto (python3 with moto and flask_cors): pip install 'moto[server]==5.2.1'"; exit 1; }
	@python3 -c 'import samtranslator.translator.transform, yaml' 2>/dev/null || { echo "demo-aws needs the SAM translator (it deploys template.yaml): pip install aws-sam-translator"; exit 1; }
	@echo "== the runner image with this stratus (make image, stratus-runner:latest only)"
	$(MAKE) --no-print-directory image IMAGE_FLAGS="-targets latest"
	rm -rf $(DEMO_AWS) && mkdir -p $(DEMO_AWS)
	$(BIN) install --dir $(DEMO_AWS)/main --primary script --scenario examples/scenario.yaml
	cp examples/task.md $(DEMO_AWS)/main/task.md
	@# The project is a git repository: the run's change comes back as a branch.
	git -C $(DEMO_AWS)/main init -q -b main && git -C $(DEMO_AWS)/main add -A && \
	  git -C $(DEMO_AWS)/main -c user.name=demo -c user.email=demo@example.invalid commit -qm "the project before the run"
	@printf 'nodes:\n  implementation:\n    - sleep_ms: 4000\n      report: implemented\n  review:\n    - report: {findings: []}\ndefault:\n  report: ok\n' > $(DEMO_AWS)/slow.yaml
	$(BIN) install --dir $(DEMO_AWS)/interrupted --primary script --scenario "$(CURDIR)/$(DEMO_AWS)/slow.yaml"
	sed 's/^id: demo-greeting/id: demo-interrupted/' examples/task.md > $(DEMO_AWS)/interrupted/task.md
	git -C $(DEMO_AWS)/interrupted init -q -b main && git -C $(DEMO_AWS)/interrupted add -A && \
	  git -C $(DEMO_AWS)/interrupted -c user.name=demo -c user.email=demo@example.invalid commit -qm "the project before the run"
	@$(BIN) dev aws > $(DEMO_AWS)/dev.out 2> $(DEMO_AWS)/dev.log & pid=$$!; \
	trap 'kill -INT $$pid 2>/dev/null; wait $$pid' EXIT; \
	for i in $$(seq 1 300); do [ -s $(DEMO_AWS)/dev.out ] && break; sleep 0.2; done; \
	flags="$$(head -1 $(DEMO_AWS)/dev.out) --poll-interval 500ms"; \
	case "$$flags" in --target*) ;; *) echo "stratus dev aws did not start:"; cat $(DEMO_AWS)/dev.log; exit 1;; esac; \
	echo "== the stand-in (stratus dev aws): $$flags"; \
	grep '^stratus dev aws: \(stack\|each task\)' $(DEMO_AWS)/dev.log; \
	echo "== 1. stratus run examples/task.md --target aws"; \
	$(BIN) run $(DEMO_AWS)/main/task.md --dir $(DEMO_AWS)/main $$flags || exit 1; \
	echo "== the engines' change travelled implementation -> review -> fixing in bundles, and came back as branch stratus/demo-greeting:"; \
	git -C $(DEMO_AWS)/main log --format='%h %s (%an)' --stat main..stratus/demo-greeting || exit 1; \
	echo "== 2. a run interrupted (stratus cancel) and resumed (stratus resume)"; \
	id=$$($(BIN) run $(DEMO_AWS)/interrupted/task.md --dir $(DEMO_AWS)/interrupted --detach $$flags) || exit 1; \
	for i in $$(seq 1 200); do $(BIN) status $$id $$flags 2>/dev/null | grep -q 'implementation#1 .* running' && break; sleep 0.3; done; \
	$(BIN) cancel $$id $$flags || exit 1; \
	$(BIN) resume $$id $$flags || exit 1; \
	echo "== 3. stratus status and runs --target aws"; \
	$(BIN) status $$id $$flags && $(BIN) runs $$flags || exit 1; \
	echo "== where each step ran (a container of the task definition's image)"; \
	grep ' runs in ' $(DEMO_AWS)/dev.log | sed 's/^stratus dev aws: /  /'; \
	if grep -q -- '--runners process' $(DEMO_AWS)/dev.log; then echo "a step ran as a host process"; exit 1; fi; \
	kill -INT $$pid; wait $$pid; trap - EXIT; \
	echo "== the functions under the emulator (REPORT lines); each task's container start to its first worker API call, beside its anchor"; \
	grep ': lambda \|first worker API call\|: anchor:' $(DEMO_AWS)/dev.log | sed 's/^stratus dev aws: /  /'

## demo-aws-claude, demo-aws-codex: the example task on stratus dev aws
## with every step a container of stratus-runner:claude (:codex), the real
## CLI in it against the scripted model server, its provider key delivered
## through the task definition's secret (examples/demo-aws-cli.sh).
## demo-aws-agents: the same with stratus-runner:agents (both CLIs), review
## pinned to Codex and every other node on Claude Code: one image for a flow
## that names both providers.
demo-aws-claude demo-aws-codex demo-aws-agents: build lambdas rie
	$(MAKE) --no-print-directory image IMAGE_FLAGS="-targets $(patsubst demo-aws-%,%,$@)"
	examples/demo-aws-cli.sh $(patsubst demo-aws-%,%,$@) .scratch/$@ $(BIN)

## demo-aws-pool: the warm runner pool (README.md § Warm runners (pool mode))
## on the same stand-in: examples/task.md once with two pooled runners per
## network profile polling moto's SQS (stratus dev aws --pool 2), once cold
## (each step a RunTask on moto, played by a local runner), then per step
## dispatch -> engine start for both and their medians. Needs moto, as
## demo-aws does.
DEMO_AWS_POOL ?= .scratch/demo-aws-pool
demo-aws-pool: build lambdas rie
	@python3 -c 'import moto, flask_cors' 2>/dev/null || { echo "demo-aws-pool needs moto (python3 with moto and flask_cors): pip install 'moto[server]==5.2.1'"; exit 1; }
	@python3 -c 'import samtranslator.translator.transform, yaml' 2>/dev/null || { echo "demo-aws-pool needs the SAM translator (it deploys template.yaml): pip install aws-sam-translator"; exit 1; }
	examples/demo-aws-pool.sh $(BIN) $(DEMO_AWS_POOL)

## image: build the runner images stratus-runner:latest, :claude, :codex and
## :agents (the Dockerfile's targets runner, runner-claude, runner-codex,
## runner-agents) through
## the Docker Engine API (Docker, or podman's socket: started when podman
## is installed and no socket answers), check each runs as non-root and
## prints its CLI's version, and print their sizes (docs/runner-image.md §
## Building the images). With no registry the Debian base is made with
## mmdebstrap (apt-get install podman runc mmdebstrap). IMAGE_FLAGS passes
## more, e.g. IMAGE_FLAGS="-targets codex -v".
IMAGE_FLAGS ?=
image:
	$(GO) run ./internal/runnerimage/cmd/makeimage -ldflags "$(LDFLAGS)" $(IMAGE_FLAGS)

## test-image: build a runner image with a Go toolchain with podman, from
## Debian packages (no registry: mmdebstrap, podman import), and run a run
## whose checks node runs `go test ./...` inside it as the runner's user
## with PATH alone (docs/runner-image.md § Checked). Not part of `make
## test`. Needs podman, runc and mmdebstrap (apt-get install podman runc
## mmdebstrap) and Debian's mirror; the base is kept in
## $(TEST_IMAGE)/storage for the next time (rm -rf it to start over).
TEST_IMAGE ?= .scratch/test-image
test-image:
	mkdir -p $(TEST_IMAGE)/bin
	CGO_ENABLED=0 $(GO) build -o $(TEST_IMAGE)/bin/stratus ./cmd/stratus
	testdata/runner-image/test-image.sh $(TEST_IMAGE)/bin/stratus $(TEST_IMAGE)

## statemachines: regenerate statemachine/<flow>.asl.json from the built-in
## flows and statemachine/worc/<task_type>.asl.json from worc's peer flows
## (compiled structurally: their role files, tools and config need not be
## here). Without $(PEER_FLOWS) the peer files are left as they are.
PEER_FLOWS ?= ../shared/peers/worc/flows
statemachines:
	@# Built into a fresh directory first: the stratus binary embeds
	@# statemachine/*.asl.json (the SAM template's definitions), so they
	@# must stay while it compiles.
	rm -rf .scratch/statemachines && mkdir -p .scratch/statemachines
	$(GO) run ./cmd/stratus compile --builtin --all --out-dir .scratch/statemachines
	rm -f statemachine/*.asl.json && cp .scratch/statemachines/*.asl.json statemachine/
	@if [ -d $(PEER_FLOWS) ]; then \
	  rm -f statemachine/worc/*.asl.json && \
	  $(GO) run ./cmd/stratus compile --all --structural --flows $(PEER_FLOWS) --out-dir statemachine/worc; \
	else \
	  echo "statemachines: $(PEER_FLOWS) not found: worc peer flows skipped, statemachine/worc/ left as is"; \
	fi

## ---- make test -----------------------------------------------------------
## Stages run in this order, each announcing itself as it starts; every stage
## runs even when an earlier one failed (so the Go tests run after a failed
## lint), and the exit status says whether any failed. A stage, or a Go test,
## whose outside tool is missing and cannot be installed here is skipped with
## a one-line notice naming the tool, and listed again at the end; a skip is
## not a failure, except under STRATUS_REQUIRE_ALL=1 (set by .ci/run: CI
## installs everything and skips nothing).
TEST_STAGES := deps vet lint-asl lint-cfn lint-shell test-go fuzz
SKIP_LOG    := $(CURDIR)/.scratch/test-skips.tsv

test:
	@mkdir -p "$$(dirname '$(SKIP_LOG)')" && : > '$(SKIP_LOG)'; failed=; start=$$(date +%s); \
	for s in $(TEST_STAGES); do \
	  t0=$$(date +%s); \
	  STRATUS_SKIP_LOG='$(SKIP_LOG)' $(MAKE) --no-print-directory $(addprefix -f ,$(MAKEFILE_LIST)) $$s || failed="$$failed $$s"; \
	  echo "   ($$s: $$(( $$(date +%s) - t0 )) s)"; \
	done; \
	if [ -s '$(SKIP_LOG)' ]; then \
	  echo "== skipped (not failures; install what is named to run them):"; \
	  awk -F'\t' '{ if (!($$1 in n)) { o[++m] = $$1; why[$$1] = $$2 } n[$$1]++; if (n[$$1] <= 3) ex[$$1] = ex[$$1] (n[$$1] > 1 ? ", " : "") $$3 } \
	    END { for (i = 1; i <= m; i++) { k = o[i]; printf "   %s: %s\n      %d skipped: %s%s\n", k, why[k], n[k], ex[k], (n[k] > 3 ? ", ..." : "") } }' '$(SKIP_LOG)'; \
	fi; \
	took=$$(( $$(date +%s) - start )); \
	if [ -n "$$failed" ]; then echo "make test: FAILED:$$failed ($$took s)"; exit 1; fi; \
	echo "make test: passed ($$took s)"

# $(call skip,TOOL,WHY): this stage cannot run here. Says so in one line,
# records it for the end of `make test`, and fails only when
# STRATUS_REQUIRE_ALL=1. WHY is expanded by the shell (it may name a shell
# variable) and, being a make argument, holds no comma.
skip = if [ "$$STRATUS_REQUIRE_ALL" = 1 ]; then echo "   FAILED: needs $(1): $(2) (STRATUS_REQUIRE_ALL=1: nothing may be skipped)" >&2; exit 1; fi; \
	echo "   SKIPPED: needs $(1): $(2)"; \
	[ -z "$$STRATUS_SKIP_LOG" ] || printf '%s\t%s\t%s\n' "$(1)" "$(2)" "make $@" >> "$$STRATUS_SKIP_LOG"

deps:
	@echo "== deps: go mod download (a cold module cache takes a few minutes; a warm one, none)"
	@$(GO) mod download

STATICCHECK_VERSION := v0.8.2
STATICCHECK := bin/tools/staticcheck-$(STATICCHECK_VERSION)

$(STATICCHECK):
	@echo "   building staticcheck $(STATICCHECK_VERSION) from source into bin/tools (once: about a minute)"
	@mkdir -p bin/tools && GOBIN="$(CURDIR)/bin/tools" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@mv bin/tools/staticcheck $@

## vet: gofmt, go vet and staticcheck (cmd/stratus also as its slim
## build, -tags slim); all three run, and the stage fails
## when any of them found a problem.
vet:
	@echo "== vet: gofmt, go vet, staticcheck"
	@rc=0; \
	out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; rc=1; fi; \
	echo "   go vet ./... (type-checks every package: a cold cache takes a few minutes)"; \
	$(GO) vet ./... || rc=1; \
	$(GO) vet -tags slim ./cmd/stratus || rc=1; \
	[ -x $(STATICCHECK) ] || $(MAKE) --no-print-directory $(STATICCHECK) || exit 1; \
	echo "   staticcheck ./..."; \
	$(STATICCHECK) ./... || rc=1; \
	$(STATICCHECK) -tags slim ./cmd/stratus || rc=1; \
	exit $$rc

lint-asl:
	@echo "== lint-asl: asl-validator on statemachine/ (the npm package, installed into node_modules/)"
	@if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then \
	  $(call skip,asl-validator,node and npm not found: install Node.js 20 or later); exit 0; \
	fi; \
	if [ ! -x node_modules/.bin/asl-validator ] || [ package.json -nt node_modules/.bin/asl-validator ]; then \
	  echo "   npm install (asl-validator, as package-lock.json pins it)"; \
	  if ! npm install --no-audit --no-fund --no-update-notifier --loglevel=error --fetch-retries=1 --fetch-timeout=60000; then \
	    $(call skip,asl-validator,npm install failed: the npm registry must be reachable once); exit 0; \
	  fi; \
	  touch node_modules/.bin/asl-validator; \
	fi; \
	for f in statemachine/*.asl.json statemachine/worc/*.asl.json; do \
	  [ -e "$$f" ] || continue; \
	  node_modules/.bin/asl-validator --json-path $$f || exit 1; \
	done

lint-cfn:
	@echo "== lint-cfn: cfn-lint on template.yaml"
	@if ! command -v cfn-lint >/dev/null 2>&1; then \
	  $(call skip,cfn-lint,not found: pip install cfn-lint); exit 0; \
	fi; \
	cfn-lint --include-checks I3011 I3013 -- template.yaml

## lint-shell: shellcheck the LocalStack scripts (they cannot run here: no
## Docker). As root with apt-get, a missing shellcheck is installed.
SHELL_SCRIPTS = localstack/*.sh localstack/init/ready.d/*.sh internal/engine/testdata/*.sh examples/*.sh examples/*/*.sh testdata/runner-image/*.sh image/stratus-runner-entrypoint .ci/run
lint-shell:
	@echo "== lint-shell: shellcheck on the LocalStack scripts and the test scripts"
	@how="apt-get install shellcheck (make test installs it itself only as root)"; \
	if ! command -v shellcheck >/dev/null 2>&1 && [ "$$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "   installing shellcheck with apt-get"; \
	  apt-get install -y -qq shellcheck >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null && apt-get install -y -qq shellcheck >/dev/null; } || \
	    how="apt-get install shellcheck failed (its errors are above)"; \
	fi; \
	if ! command -v shellcheck >/dev/null 2>&1; then \
	  $(call skip,shellcheck,not found: $$how); exit 0; \
	fi; \
	shellcheck $(SHELL_SCRIPTS)

## test-go: the Go tests with the race detector (which needs cgo: without a C
## compiler they run without it, saying so). Tests that need a tool from
## outside Go skip through internal/testenv, naming it.
test-go:
	@echo "== test-go: go test -race ./... (the AWS-side tests run against a local moto server)"
	@race=-race; \
	if [ "$$($(GO) env CGO_ENABLED)" != 1 ]; then \
	  $(call skip,race detector,cgo is off: no C compiler (install gcc) so the tests run without -race); race=; \
	fi; \
	$(GO) test $$race -count=1 -timeout 25m ./...

## fuzz: run each fuzz target for FUZZTIME (seeded from testdata/cases);
## go test takes one target per -fuzz run.
# A count, not a duration: a time-bounded run can end mid-input and report
# "context deadline exceeded" as a failure.
FUZZTIME ?= 1000x
FUZZ     = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzz
fuzz:
	@echo "== fuzz: each fuzz target for $(FUZZTIME)"
	$(FUZZ) '^FuzzFold_Value$$' ./internal/fold
	$(FUZZ) '^FuzzCheckPartName$$' ./internal/projection
	$(FUZZ) '^FuzzProjection_RoundTrip$$' ./internal/projection
	$(FUZZ) '^FuzzEncode_FastPathIsTheLibrarysBytes$$' ./internal/projection
	$(FUZZ) '^FuzzAppendEncodingJSON$$' ./internal/jsonstr
	$(FUZZ) '^FuzzVerify$$' ./internal/captoken
	$(FUZZ) '^FuzzWorkerAPI$$' ./internal/httpapi
	$(FUZZ) '^FuzzEventLine$$' ./internal/contract
	$(FUZZ) '^FuzzScanObject$$' ./internal/contract

## bench: every benchmark, then the figures (BENCH lines: each next to its
## anchor measured in the same run, medians of interleaved rounds). The
## floors, each a program doing only what the product must do:
## start-floor: a program that only links the SQLite driver (start, the slim
## stratus --help, is held to it); start-libs-floor: one that links every
## library the slim stratus links (go list -deps -tags slim) and does nothing.
## overhead-floor: per step of 20, two SQLite transactions (step and attempt
## rows, then done), three files in a new step directory, one engine spawn.
## submit-floor: a bare handler inserting each 64 KiB body into SQLite (one
## writer) and replacing its one projection file, from the same 8 clients.
## dispatch-flat-aws-floor: one 2-item DynamoDB transaction and one read on
## the moto tables of a 500-step and a 5-step run (moto copies a table per
## transaction: the stand-in's time grows with the table, its items do not).
## PHASE lines: where a step of the overhead figure's chain and of its floor
## spends its time (one traced run of each, STRATUS_TRACE).
## read-flat-ui-rows: the run page of a run one page long (20 steps) against
## a 10-step run's: what the page's rows cost, the run's length aside
## (read-flat-page holds a 1,000-step run's reads to that run's).
## bench also prints bench-scale's line; bench-scale alone prints only it:
## bench-scale: BENCH_SCALE (1,000) embedded runs of a 2-step flow with the
## four-line shell engine, handed at once to one host (stratus host): the
## peak RSS of all its processes against 1 GiB, the wall time, runs
## a minute and the host's CPU per step, as a BENCH line.
BENCH_SCALE ?= 1000
bench-scale:
	@mkdir -p .scratch
	@STRATUS_BENCH_SCALE=$(BENCH_SCALE) $(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -timeout 60m ./cmd/stratus > .scratch/bench-scale.txt 2>&1; status=$$?; \
	  cat .scratch/bench-scale.txt; echo "== figures"; grep -E '^BENCH ' .scratch/bench-scale.txt; exit $$status

bench:
	@mkdir -p .scratch
	@STRATUS_BENCH_SCALE=$(BENCH_SCALE) $(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./... > .scratch/bench.txt 2>&1; status=$$?; \
	  cat .scratch/bench.txt; echo "== figures"; grep -E '^(BENCH|LAMBDA|PHASE) ' .scratch/bench.txt; exit $$status

clean:
	rm -rf bin .scratch

## ---- AWS: Lambda artifacts, SAM, LocalStack (functions/, template.yaml, localstack/)
.PHONY: lambdas rie sam-build deploy localstack-up localstack-deploy localstack-down lint-aws

## lambdas: build each functions/<name> as $(LAMBDA_DIR)/<name>/bootstrap as
## `sam build` builds a provided.al2023 function (GOOS=linux, CGO_ENABLED=0,
## -tags lambda.norpc, -trimpath), statically linked, for LAMBDA_ARCH: this
## machine's by default (what `stratus dev aws` runs under the emulator);
## LAMBDA_ARCH=arm64 is the template's Architectures, what `make deploy`
## ships (functions/build_test.go builds them that way through this target
## and checks the artifacts).
LAMBDA_DIR  ?= bin/lambdas
LAMBDA_ARCH ?= $(shell $(GO) env GOHOSTARCH)
LAMBDAS     := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
LAMBDA_ENV   = GOOS=linux GOARCH=$(LAMBDA_ARCH) CGO_ENABLED=0
LAMBDA_GOFLAGS := -tags=lambda.norpc -trimpath -ldflags=-s
lambdas:
	@for f in $(LAMBDAS); do \
	  echo "lambdas: functions/$$f -> $(LAMBDA_DIR)/$$f/bootstrap ($(LAMBDA_ARCH))"; \
	  $(LAMBDA_ENV) $(GO) build $(LAMBDA_GOFLAGS) -o $(LAMBDA_DIR)/$$f/bootstrap ./functions/$$f || exit 1; \
	done

## rie: the AWS Lambda Runtime Interface Emulator (the `tool` of go.mod,
## from the Go module proxy) as bin/aws-lambda-rie: what `stratus dev aws`
## runs each function's bootstrap under (internal/devstack/lambdas).
rie:
	$(GO) build -o bin/aws-lambda-rie github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie

## sam-build: `sam build` (SAM's go1.x builder, one CodeUri per function) with
## the same environment and flags as `lambdas`. SAM=samlocal for LocalStack.
SAM ?= sam
SAM_BUILD_FLAGS ?=
sam-build:
	$(LAMBDA_ENV) GOARCH=arm64 GOFLAGS='$(LAMBDA_GOFLAGS)' $(SAM) build --template template.yaml $(SAM_BUILD_FLAGS)

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
lint-aws: lint-shell
	$(GO) test -count=1 -run '^(TestLocalStack|TestTemplate)' ./localstack/ ./functions/

