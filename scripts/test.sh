#!/usr/bin/env bash
# The one test command (README, .ci/run): every module of the workspace gets gofmt, go vet,
# staticcheck, a `go mod tidy` that must change nothing, `go test -race`, and one run of every
# benchmark (-benchtime 1x) so none rots; the root module's allocation-count tests also run without
# the race detector, which changes allocation counts. PostgreSQL and Redis are started when they are installed but
# not answering, and their test variables exported, so that integration tests run instead of skipping.
# The browser tests' Chromium and axe-core are installed when missing (below), for the same reason.
# Exits non-zero when anything fails; prints a closing "N passed, N failed" line over the modules.
#
# Usage: bash scripts/test.sh [--services-only]
#   --services-only   set the services and the browser up as below, print what was chosen, and stop:
#                     no check runs.
#
# SVC_TEST_SERVICES chooses the real servers the integration tests use (default auto):
#   auto        each of PostgreSQL and Redis that is installed is started if stopped, and used;
#               one that is not installed is left out, and its tests skip
#   all         both, and a missing one fails the run (what CI=true makes of auto)
#   postgres    PostgreSQL only (required); SVC_TEST_REDIS_URL is unset and the Redis tests skip
#   redis       Redis only (required); SVC_TEST_POSTGRES_DSN is unset and the PostgreSQL tests skip
#   none        neither: both variables are unset and every integration test skips
# With CI=true only auto and all are accepted: CI must not skip. Unsetting a variable (env -u) skips
# nothing, since auto exports it again when the local server answers: use SVC_TEST_SERVICES.
#
# The local servers: PostgreSQL on 127.0.0.1:5432 with user postgres, trust authentication and a
# database test (created here when missing, if psql and createdb are installed), and Redis on
# 127.0.0.1:6379 without persistence. To use other servers, set SVC_TEST_POSTGRES_DSN and/or
# SVC_TEST_REDIS_URL: a variable that is already set is used as it is, checked but never started.
#
# The browser tests (examples/internal/browser) drive a headless Chromium and run axe-core in it:
#   Chromium    chromium, chromium-browser or google-chrome on PATH; when none is there, Debian's
#               chromium is installed with apt-get (as root, or through passwordless sudo), and
#               exported as SVC_TEST_CHROMIUM
#   axe-core    the release pinned in examples/internal/browser/axe.go, fetched once with `npm pack`
#               into the cache the tests use ($XDG_CACHE_HOME or ~/.cache, svc-conventions/axe-core@V),
#               checked against its pinned SHA-256, and exported as SVC_TEST_AXE_JS
# Without them the browser tests skip; with CI=true a failed install fails the run instead. A
# SVC_TEST_CHROMIUM or SVC_TEST_AXE_JS that is already set is used as it is.
set -uo pipefail
cd "$(dirname "$0")/.."

modules=(. pgstore redisstore otelconv examples benchmarks internal/testkit tools)
staticcheck_version=v0.8.2
# The Go floor: every go.mod and go.work says `go 1.25.0`, the older of the two releases the README
# supports, and the root module's tests run once more on this toolchain (the newest patch of that
# release, which the module proxy serves as golang.org/toolchain), so that the floor is real.
floor_toolchain=go1.25.14

services_only=false
for arg in "$@"; do
	case $arg in
	--services-only) services_only=true ;;
	-h | --help)
		sed -n '2,/^set -uo pipefail$/{/^set /d;s/^# \{0,1\}//;p}' "$0"
		exit 0
		;;
	*)
		echo "scripts/test.sh: unknown argument $arg (want --services-only or --help)" >&2
		exit 2
		;;
	esac
done

# --- services -------------------------------------------------------------------------------------
pg_host=127.0.0.1 pg_port=5432 pg_db=test pg_user=postgres
pg_local_dsn="postgres://$pg_user@$pg_host:$pg_port/$pg_db?sslmode=disable"
redis_host=127.0.0.1 redis_port=6379
redis_local_url="redis://$redis_host:$redis_port/0"

# redact masks the password in a URL or a keyword/value DSN before it is printed.
redact() {
	sed -E -e 's#(://[^:/@]*):[^@/]*@#\1:xxxxx@#' -e "s#(password=)('[^']*'|[^ &]*)#\1xxxxx#g" <<<"$1"
}

pg_answers() { pg_isready -q -t 3 "$@"; }
redis_answers() { timeout 5 redis-cli "$@" ping 2>/dev/null | grep -q PONG; }

# ensure_test_db makes sure the tests can use database test as user postgres on the local server,
# creating the database when it is missing; otherwise it says exactly what to run.
ensure_test_db() {
	local psql=(psql -w -X -q -A -t -h "$pg_host" -p "$pg_port" -U "$pg_user")
	if ! command -v psql >/dev/null 2>&1 || ! command -v createdb >/dev/null 2>&1; then
		echo "note: psql/createdb are not installed: not checking that database $pg_db exists"
		return 0
	fi
	local out
	if out=$("${psql[@]}" -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$pg_db'" 2>&1); then
		if [ -z "$out" ]; then
			echo "creating database $pg_db (user $pg_user on $pg_host:$pg_port)"
			out=$(createdb -w -h "$pg_host" -p "$pg_port" -U "$pg_user" "$pg_db" 2>&1) || out="createdb: $out"
		fi
		if out=$("${psql[@]}" -d "$pg_db" -c 'SELECT 1' 2>&1); then
			return 0
		fi
	fi
	cat <<-EOF
		FAIL: PostgreSQL answers on $pg_host:$pg_port, but the tests cannot use database $pg_db as user $pg_user:
		  $out
		The tests expect user $pg_user with trust authentication from $pg_host, and a database $pg_db.
		  - trust: add this line above the other host lines of pg_hba.conf, then reload PostgreSQL
		    (the file: sudo -u postgres psql -Atc 'SHOW hba_file'; reload: sudo -u postgres psql -c 'SELECT pg_reload_conf()'):
		      host  all  $pg_user  $pg_host/32  trust
		  - the database: createdb -h $pg_host -p $pg_port -U $pg_user $pg_db
		Or point the tests at another server with SVC_TEST_POSTGRES_DSN, or skip them with SVC_TEST_SERVICES=redis or none.
	EOF
	return 1
}

# setup_postgres MODE (off, maybe, required) exports SVC_TEST_POSTGRES_DSN, or unsets it, or fails.
setup_postgres() {
	local mode=$1
	if [ "$mode" = off ]; then
		unset SVC_TEST_POSTGRES_DSN
		return 0
	fi
	if [ -n "${SVC_TEST_POSTGRES_DSN:-}" ]; then
		# A server of the caller's: used as it is, never started or changed.
		if command -v pg_isready >/dev/null 2>&1 && ! pg_answers -d "$SVC_TEST_POSTGRES_DSN"; then
			echo "FAIL: SVC_TEST_POSTGRES_DSN=$(redact "$SVC_TEST_POSTGRES_DSN") is set but nothing answers there: start that server or unset the variable"
			return 1
		fi
		export SVC_TEST_POSTGRES_DSN
		return 0
	fi
	if ! command -v pg_isready >/dev/null 2>&1; then
		if [ "$mode" = required ]; then
			echo "FAIL: PostgreSQL is required (SVC_TEST_SERVICES=$services) but not installed (no pg_isready): install it, or set SVC_TEST_POSTGRES_DSN"
			return 1
		fi
		return 0
	fi
	if ! pg_answers -h "$pg_host" -p "$pg_port"; then
		echo "starting PostgreSQL"
		pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
		for _ in $(seq 1 30); do pg_answers -h "$pg_host" -p "$pg_port" && break; sleep 1; done
	fi
	if ! pg_answers -h "$pg_host" -p "$pg_port"; then
		if [ "$mode" = required ]; then
			echo "FAIL: PostgreSQL is not answering on $pg_host:$pg_port"
			return 1
		fi
		return 0
	fi
	ensure_test_db || return 1
	export SVC_TEST_POSTGRES_DSN=$pg_local_dsn
}

# setup_redis MODE (off, maybe, required) exports SVC_TEST_REDIS_URL, or unsets it, or fails.
setup_redis() {
	local mode=$1
	if [ "$mode" = off ]; then
		unset SVC_TEST_REDIS_URL
		return 0
	fi
	if [ -n "${SVC_TEST_REDIS_URL:-}" ]; then
		# A server of the caller's: used as it is, never started or changed. (rediss:// is left to
		# the tests, which probe it themselves: redis-cli would need its certificates.)
		if command -v redis-cli >/dev/null 2>&1 && [[ $SVC_TEST_REDIS_URL == redis://* ]] &&
			! redis_answers -u "$SVC_TEST_REDIS_URL"; then
			echo "FAIL: SVC_TEST_REDIS_URL=$(redact "$SVC_TEST_REDIS_URL") is set but nothing answers there: start that server or unset the variable"
			return 1
		fi
		export SVC_TEST_REDIS_URL
		return 0
	fi
	if ! command -v redis-cli >/dev/null 2>&1; then
		if [ "$mode" = required ]; then
			echo "FAIL: Redis is required (SVC_TEST_SERVICES=$services) but not installed (no redis-cli): install it, or set SVC_TEST_REDIS_URL"
			return 1
		fi
		return 0
	fi
	if ! redis_answers -h "$redis_host" -p "$redis_port"; then
		echo "starting Redis"
		redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$redis_port" --save "" --appendonly no || true
		for _ in $(seq 1 30); do redis_answers -h "$redis_host" -p "$redis_port" && break; sleep 1; done
	fi
	if ! redis_answers -h "$redis_host" -p "$redis_port"; then
		if [ "$mode" = required ]; then
			echo "FAIL: Redis is not answering on $redis_host:$redis_port"
			return 1
		fi
		return 0
	fi
	export SVC_TEST_REDIS_URL=$redis_local_url
}

services=${SVC_TEST_SERVICES:-auto}
case $services in
auto | all | none | postgres | redis) ;;
*)
	echo "FAIL: SVC_TEST_SERVICES=$services is not one of: auto, all, none, postgres, redis (default auto; see scripts/test.sh)"
	exit 2
	;;
esac
if [ "${CI:-}" = "true" ]; then
	case $services in
	auto | all) services=all ;; # in CI nothing may skip: both services must be there
	*)
		echo "FAIL: SVC_TEST_SERVICES=$services skips integration tests, and CI (CI=true) must run them all: use auto or all"
		exit 2
		;;
	esac
fi
case $services in
auto) pg_mode=maybe redis_mode=maybe ;;
all) pg_mode=required redis_mode=required ;;
postgres) pg_mode=required redis_mode=off ;;
redis) pg_mode=off redis_mode=required ;;
none) pg_mode=off redis_mode=off ;;
esac
echo "SVC_TEST_SERVICES=$services${CI:+ (CI=$CI)}: PostgreSQL $pg_mode, Redis $redis_mode"
setup_postgres "$pg_mode" || exit 1
setup_redis "$redis_mode" || exit 1
if [ -n "${SVC_TEST_POSTGRES_DSN:-}" ]; then
	echo "SVC_TEST_POSTGRES_DSN=$(redact "$SVC_TEST_POSTGRES_DSN")"
else
	echo "SVC_TEST_POSTGRES_DSN=<unset: PostgreSQL tests skip>"
fi
if [ -n "${SVC_TEST_REDIS_URL:-}" ]; then
	echo "SVC_TEST_REDIS_URL=$(redact "$SVC_TEST_REDIS_URL")"
else
	echo "SVC_TEST_REDIS_URL=<unset: Redis tests skip>"
fi

# --- browser --------------------------------------------------------------------------------------
ci=false
[ "${CI:-}" = "true" ] && ci=true
browser_go=examples/internal/browser/axe.go
axe_version=$(sed -nE 's/^[[:space:]]*axeVersion[[:space:]]*=[[:space:]]*"([^"]+)"$/\1/p' "$browser_go")
axe_sha256=$(sed -nE 's/^[[:space:]]*axeSHA256[[:space:]]*=[[:space:]]*"([0-9a-f]{64})"$/\1/p' "$browser_go")

# as_root runs a command as root: as it is when this is root, through sudo when sudo needs no
# password; it fails (126) when neither is possible, so `as_root true` asks whether it can.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		return 126
	fi
}

find_chromium() {
	local name
	for name in chromium chromium-browser google-chrome; do
		command -v "$name" 2>/dev/null && return 0
	done
	return 1
}

# browser_missing WHAT: in CI a FAIL (return 1), elsewhere a note that the browser tests skip.
browser_missing() {
	if $ci; then
		echo "FAIL: $1; CI (CI=true) must run the browser tests"
		return 1
	fi
	echo "note: $1: the browser tests will skip"
}

# setup_chromium exports SVC_TEST_CHROMIUM, installing Debian's chromium when no browser is on PATH.
setup_chromium() {
	if [ -n "${SVC_TEST_CHROMIUM:-}" ]; then
		if ! command -v "$SVC_TEST_CHROMIUM" >/dev/null 2>&1; then
			echo "FAIL: SVC_TEST_CHROMIUM=$SVC_TEST_CHROMIUM is set but is not an executable: fix it or unset it"
			return 1
		fi
		export SVC_TEST_CHROMIUM
		return 0
	fi
	local path log
	if ! path=$(find_chromium); then
		if ! command -v apt-get >/dev/null 2>&1; then
			browser_missing "no Chromium on PATH and no apt-get to install it"
			return
		fi
		if ! as_root true; then
			browser_missing "no Chromium on PATH, and installing it (apt-get install chromium) needs root or passwordless sudo"
			return
		fi
		echo "installing chromium (apt-get install chromium)"
		log=$(mktemp)
		install_chromium() {
			as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >>"$log" 2>&1
		}
		if ! install_chromium; then
			# A machine whose package lists were never fetched (or are stale) knows no chromium.
			echo "apt-get install failed; running apt-get update and trying again"
			as_root env DEBIAN_FRONTEND=noninteractive apt-get update >>"$log" 2>&1
			install_chromium
		fi
		if ! path=$(find_chromium); then
			tail -n 20 "$log"
			rm -f "$log"
			browser_missing "installing chromium failed (apt-get output above)"
			return
		fi
		rm -f "$log"
	fi
	export SVC_TEST_CHROMIUM=$path
}

sha256_is() { [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# setup_axe exports SVC_TEST_AXE_JS: the pinned axe-core from the tests' cache, fetched with npm when
# it is not there yet.
setup_axe() {
	if [ -n "${SVC_TEST_AXE_JS:-}" ]; then
		if [ ! -r "$SVC_TEST_AXE_JS" ]; then
			echo "FAIL: SVC_TEST_AXE_JS=$SVC_TEST_AXE_JS is set but cannot be read: fix it or unset it"
			return 1
		fi
		export SVC_TEST_AXE_JS
		return 0
	fi
	if [ -z "$axe_version" ] || [ -z "$axe_sha256" ]; then
		echo "FAIL: cannot read axeVersion and axeSHA256 from $browser_go"
		return 1
	fi
	# Where the Go helper looks (os.UserCacheDir): $XDG_CACHE_HOME when it is absolute, else ~/.cache.
	local cache_home
	if [[ ${XDG_CACHE_HOME:-} == /* ]]; then
		cache_home=$XDG_CACHE_HOME
	elif [ -n "${HOME:-}" ]; then
		cache_home=$HOME/.cache
	else
		browser_missing "neither HOME nor XDG_CACHE_HOME is set, so axe-core has no cache"
		return
	fi
	local dir=$cache_home/svc-conventions/axe-core@$axe_version
	local file=$dir/axe.min.js
	if [ -f "$file" ] && sha256_is "$file" "$axe_sha256"; then
		export SVC_TEST_AXE_JS=$file
		return 0
	fi
	if ! command -v npm >/dev/null 2>&1; then
		browser_missing "axe-core $axe_version is not cached and npm is not installed"
		return
	fi
	echo "fetching axe-core $axe_version (npm pack)"
	local tmp out
	tmp=$(mktemp -d)
	if ! out=$(cd "$tmp" && npm pack "axe-core@$axe_version" --pack-destination "$tmp" --silent 2>&1) ||
		! out=$(tar -xzf "$tmp/axe-core-$axe_version.tgz" -C "$tmp" package/axe.min.js 2>&1); then
		rm -rf "$tmp"
		echo "$out" | tail -n 20
		browser_missing "fetching axe-core $axe_version with npm failed (output above)"
		return
	fi
	if ! sha256_is "$tmp/package/axe.min.js" "$axe_sha256"; then
		rm -rf "$tmp"
		echo "FAIL: npm's axe-core $axe_version does not have the SHA-256 pinned in $browser_go"
		return 1
	fi
	# Through a rename, so that a test running now reads the whole file or none.
	mkdir -p "$dir" && mv "$tmp/package/axe.min.js" "$dir/.axe.min.js.$$" && chmod 644 "$dir/.axe.min.js.$$" &&
		mv -f "$dir/.axe.min.js.$$" "$file"
	local rc=$?
	rm -rf "$tmp"
	if [ "$rc" -ne 0 ]; then
		echo "FAIL: cannot write $file"
		return 1
	fi
	export SVC_TEST_AXE_JS=$file
}

setup_chromium || exit 1
setup_axe || exit 1
if [ -n "${SVC_TEST_CHROMIUM:-}" ]; then
	echo "SVC_TEST_CHROMIUM=$SVC_TEST_CHROMIUM ($("$SVC_TEST_CHROMIUM" --version 2>/dev/null | head -n1))"
else
	echo "SVC_TEST_CHROMIUM=<unset: browser tests skip>"
fi
if [ -n "${SVC_TEST_AXE_JS:-}" ]; then
	echo "SVC_TEST_AXE_JS=$SVC_TEST_AXE_JS"
else
	echo "SVC_TEST_AXE_JS=<unset: axe checks skip unless the tests can fetch axe-core themselves>"
fi

if $services_only; then
	exit 0
fi

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
	local t0=$SECONDS
	if "$@"; then
		passed=$((passed + 1))
		echo "    ok ($((SECONDS - t0)) s)"
	else
		failed=$((failed + 1))
		failures+=("$name")
		echo "    FAILED ($((SECONDS - t0)) s)"
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

# clean_tree fails when a tracked file is an executable binary (ELF, Mach-O, PE, WebAssembly, or a file
# with an execute bit that is not a #! script) or larger than 1 MiB: a compiled demo was committed twice
# through `git commit -a`. Build outputs are ignored by .gitignore instead.
clean_tree() {
	# Files allowed anyway, one path a line with the reason beside it. Empty today.
	local -A allowed=(
	)
	local limit=$((1 << 20)) bad=0 entry f size magic mode
	while IFS= read -r -d '' entry; do
		f=${entry#*$'\t'} mode=${entry%% *}
		[ -n "${allowed[$f]+x}" ] && continue
		[ -f "$f" ] && [ ! -L "$f" ] || continue
		size=$(stat -c %s -- "$f")
		if [ "$size" -gt "$limit" ]; then
			echo "tracked file larger than 1 MiB: $f ($size bytes)"
			bad=1
		fi
		magic=$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')
		case $magic in
		7f454c46 | feedface | feedfacf | cefaedfe | cffaedfe | cafebabe | 0061736d | 4d5a*)
			echo "tracked file is an executable binary: $f"
			bad=1
			continue
			;;
		esac
		if [ "$mode" = 100755 ] && [ "${magic:0:4}" != 2321 ]; then
			echo "tracked file has an execute bit but is not a #! script: $f"
			bad=1
		fi
	done < <(git ls-files -s -z)
	[ "$bad" -eq 0 ] || echo "remove it (git rm --cached), ignore it in .gitignore, or add it to clean_tree's allowed list with why"
	return "$bad"
}
step "tree: no binaries, nothing over 1 MiB" clean_tree

for m in "${modules[@]}"; do
	[ -f "$m/go.mod" ] || continue
	step "$m: gofmt" gofmt_clean "$m"
	step "$m: go mod tidy" tidy_unchanged "$m"
	step "$m: go vet" bash -c "cd '$m' && go vet ./..."
	step "$m: staticcheck" bash -c "cd '$m' && '$staticcheck_bin' ./..."
	step "$m: go test -race" bash -c "cd '$m' && go test -race -count=1 -timeout 20m ./..."
	# The race detector changes allocation counts (sync.Pool drops items at random), so the tests that
	# count allocations skip under it and run here, without it.
	[ "$m" = . ] && step "$m: allocation counts" bash -c "cd '$m' && go test -count=1 -run 'Alloc|CostsNothing' ./..."
	step "$m: benchmarks once" bash -c "cd '$m' && go test -run '^\$' -bench . -benchtime 1x -count=1 -timeout 20m ./..."
done

# same_floor fails unless every go.mod and go.work declares the same go line, of floor_toolchain's release.
same_floor() {
	local want lines
	want="go $(sed -E 's/^go([0-9]+\.[0-9]+)\..*/\1/' <<<"$floor_toolchain").0"
	lines=$(grep -H '^go ' go.work $(git ls-files '*go.mod') | grep -v ":$want\$")
	[ -z "$lines" ] || { echo "want \"$want\" (the floor, from floor_toolchain=$floor_toolchain) in every go.mod and go.work:"; echo "$lines"; return 1; }
}
step "go floor: one go line everywhere" same_floor
step "go floor: root module tests on $floor_toolchain" bash -c "GOTOOLCHAIN=$floor_toolchain go test -count=1 -timeout 20m ./..."
step "go floor: go vet of every module on $floor_toolchain" bash -c "for m in ${modules[*]}; do (cd \$m && GOTOOLCHAIN=$floor_toolchain go vet ./...) || exit 1; done"

# The install test (tools/installcheck; RELEASING.md): every public module at the release version from
# a module proxy made of the working tree, into a module outside the repository, and the README's first
# service built there and run against the real PostgreSQL and Redis.
if [ -n "${SVC_TEST_POSTGRES_DSN:-}" ] && [ -n "${SVC_TEST_REDIS_URL:-}" ]; then
	step "install: go get every module from a module proxy, run the README's first service" go run ./tools/installcheck
else
	echo "--- install: skipped, it needs both PostgreSQL and Redis (SVC_TEST_SERVICES=$services)"
fi

echo
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
