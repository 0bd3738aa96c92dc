# tests/check-az/lib.sh - sourced by the smddp-check-az tests: paths, the IMDS emulator, cleanup
#
# Only loopback is ever contacted: every test sets AWS_EC2_METADATA_SERVICE_ENDPOINT
# to the emulator (or to a closed loopback port), never the default address.

set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"

AZ="$top_builddir/cmd/check-az/smddp-check-az"
FIX="$top_srcdir/tests/check-az/fixtures"
EMU="$top_srcdir/tests/check-az/imds-emu.py"

if [ ! -x "$AZ" ]; then
	if ! grep -q '^#define HAVE_CURL 1' "$top_builddir/config.h"; then
		echo "SKIP: smddp-check-az is not built: configured without libcurl (libcurl4-openssl-dev)"
		exit 77
	fi
	echo "FAIL: $AZ is missing although libcurl was found" >&2
	exit 1
fi
command -v python3 >/dev/null || { echo "SKIP: python3 (for the IMDS emulator) is not installed"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-check-az-test.XXXXXX") || exit 99
EMU_PIDS=""

cleanup() {
	local p
	for p in $EMU_PIDS; do
		kill "$p" 2>/dev/null
	done
	for p in $EMU_PIDS; do
		wait "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# No inherited setting may change what the tests see, and nothing may go to
# the real metadata address: a test that forgets to set the endpoint talks to
# a closed loopback port.
unset AWS_EC2_METADATA_DISABLED AWS_EC2_METADATA_V1_DISABLED \
	AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE AWS_METADATA_SERVICE_TIMEOUT \
	AWS_METADATA_SERVICE_NUM_ATTEMPTS SMDDP_CHECK_AZ_S3_ENDPOINT
export AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1

. "$top_srcdir/tests/lib.sh" # fail (stops the test), skip, now, since

# start_emu [BIND]: starts the emulator on a free port of BIND (127.0.0.1 or
# ::1), sets EMU_URL (without a host segment) and EMU_LOG; 30 s to come up.
start_emu() {
	local bind=${1:-127.0.0.1} n=${#EMU_PIDS} i port
	local pf="$T/emu-port.$n.$RANDOM"
	EMU_LOG="$T/emu-log.$n.$RANDOM"
	: >"$EMU_LOG"
	python3 "$EMU" --fixtures "$FIX" --port-file "$pf" --log "$EMU_LOG" \
		--bind "$bind" --lifetime 300 &
	EMU_PIDS="$EMU_PIDS $!"
	for ((i = 0; i < 300; i++)); do
		[ -s "$pf" ] && break
		kill -0 "$!" 2>/dev/null || fail "the IMDS emulator died on start"
		sleep 0.1
	done
	[ -s "$pf" ] || fail "the IMDS emulator did not report its port within 30 s"
	port=$(cat "$pf")
	if [ "$bind" = ::1 ]; then
		EMU_URL="http://[::1]:$port"
	else
		EMU_URL="http://127.0.0.1:$port"
	fi
}

# az [ARGS...]: runs the tool (60 s at most), stdout to $T/out, stderr to
# $T/err, exit status in RC.
az() {
	RC=0
	timeout 60 "$AZ" "$@" >"$T/out" 2>"$T/err" || RC=$?
	[ "$RC" -ne 124 ] || fail "smddp-check-az $* ran 60 s"
}

# expect_rc N WHAT: the last az call exited N
expect_rc() {
	[ "$RC" -eq "$1" ] || fail "$2: exit status $RC, not $1; stdout: $(cat "$T/out"); stderr: $(cat "$T/err")"
}

# jq-like field access without jq: json_get FILE EXPR (a Python expression on d)
json_get() {
	python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read()); print(eval(sys.argv[2]))' "$1" "$2"
}

# emit_host NAME [ARGS...]: NAME's record (from the emulator) appended to $T/records
emit_host() {
	local name=$1
	shift
	AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/$name" az --emit "$@"
	expect_rc 0 "--emit of $name"
	cat "$T/out" >>"$T/records"
}

# count_log 'METHOD PATH-PREFIX STATUS': lines of the emulator log matching
count_log() {
	grep -c -- "$1" "$EMU_LOG" || true
}
