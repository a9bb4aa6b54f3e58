#!/usr/bin/env bash
# The one test command (README, .ci/run): every module of the workspace gets gofmt, go vet,
# staticcheck, a `go mod tidy` that must change nothing, `go test -race`, and one run of every
# benchmark so none rots. PostgreSQL and Redis are started when they are installed but not answering,
# and their test variables exported, so that integration tests run instead of skipping.
# Exits non-zero when anything fails; prints a closing "N passed, N failed" line over the modules.
set -uo pipefail
cd "$(dirname "$0")/.."

modules=(. pgstore redisstore examples benchmarks)
staticcheck_version=v0.8.2

# --- services -------------------------------------------------------------------------------------
start_services() {
	if command -v pg_isready >/dev/null 2>&1; then
		if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
			echo "starting PostgreSQL"
			pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
			for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
		fi
		if pg_isready -h 127.0.0.1 -p 5432 -q; then
			export SVC_TEST_POSTGRES_DSN="${SVC_TEST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
		fi
	fi
	if command -v redis-cli >/dev/null 2>&1; then
		if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
			echo "starting Redis"
			redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no || true
			for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
		fi
		if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
			export SVC_TEST_REDIS_URL="${SVC_TEST_REDIS_URL:-redis://127.0.0.1:6379/0}"
		fi
	fi
	if [ "${CI:-}" = "true" ]; then
		# In CI nothing may skip: both services must be there.
		[ -n "${SVC_TEST_POSTGRES_DSN:-}" ] || { echo "FAIL: PostgreSQL is not answering"; exit 1; }
		[ -n "${SVC_TEST_REDIS_URL:-}" ] || { echo "FAIL: Redis is not answering"; exit 1; }
	fi
	echo "SVC_TEST_POSTGRES_DSN=${SVC_TEST_POSTGRES_DSN:-<unset: PostgreSQL tests skip>}"
	echo "SVC_TEST_REDIS_URL=${SVC_TEST_REDIS_URL:-<unset: Redis tests skip>}"
}
start_services

# --- tools ----------------------------------------------------------------------------------------
staticcheck_bin="$(go env GOPATH)/bin/staticcheck"
if ! "$staticcheck_bin" -version 2>/dev/null | grep -q "${staticcheck_version#v}"; then
	echo "installing staticcheck $staticcheck_version"
	GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version" || { echo "FAIL: staticcheck install"; exit 1; }
fi

passed=0
failed=0
failures=()
step() { # step NAME COMMAND...
	local name=$1
	shift
	echo "--- $name"
	if "$@"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("$name")
	fi
}

gofmt_clean() {
	local out
	out=$(gofmt -l "$1")
	[ -z "$out" ] || { echo "gofmt would change:"; echo "$out"; return 1; }
}

tidy_unchanged() {
	(cd "$1" && GOWORK=off go mod tidy -diff)
}

for m in "${modules[@]}"; do
	[ -f "$m/go.mod" ] || continue
	step "$m: gofmt" gofmt_clean "$m"
	step "$m: go mod tidy" tidy_unchanged "$m"
	step "$m: go vet" bash -c "cd '$m' && go vet ./..."
	step "$m: staticcheck" bash -c "cd '$m' && '$staticcheck_bin' ./..."
	step "$m: go test -race" bash -c "cd '$m' && go test -race -count=1 -timeout 20m ./..."
	step "$m: benchmarks once" bash -c "cd '$m' && go test -run '^\$' -bench . -benchtime 1x -count=1 -timeout 20m ./..."
done

echo
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
