# fault-env.sh - a bad environment (or ranks whose settings differ) makes smddp_init fail at once,
# with a sentence that says what is wrong.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"

port=$("$FAULT" freeport) || { echo "ERROR: no free port"; exit 99; }

# check_env NAME WORDS-REGEX VAR=VALUE...: SMDDP_EINVAL or SMDDP_ECONFIG within 5 s
check_env() {
	local name=$1 re=$2
	shift 2
	run_alone "$name" 30 SMDDP_TIMEOUT=20 "$@" -- "$FAULT" init
	case $status in
	1 | 11) pass "$name: exit $status" ;;
	*) fail "$name: exit $status, expected 1 (SMDDP_EINVAL) or 11 (SMDDP_ECONFIG)" ;;
	esac
	if awk -v t="$elapsed" 'BEGIN { exit !(t < 5) }'; then pass "$name: failed in $elapsed s"; else fail "$name: took $elapsed s to fail"; fi
	if grep -Eq -- "$re" "$TDIR/$name.out"; then pass "$name: the message matches /$re/"; else fail "$name: the message does not match /$re/"; fi
}

check_env no-port 'MASTER_PORT' SMDDP_RANK=0 SMDDP_WORLD_SIZE=2 SMDDP_MASTER_ADDR=127.0.0.1
check_env rank-too-big '5' SMDDP_RANK=5 SMDDP_WORLD_SIZE=2 SMDDP_MASTER_ADDR=127.0.0.1 SMDDP_MASTER_PORT="$port"
check_env rank-not-a-number 'SMDDP_RANK|abc' SMDDP_RANK=abc SMDDP_WORLD_SIZE=2 SMDDP_MASTER_ADDR=127.0.0.1 SMDDP_MASTER_PORT="$port"
check_env size-zero 'SMDDP_WORLD_SIZE|size' SMDDP_RANK=0 SMDDP_WORLD_SIZE=0 SMDDP_MASTER_ADDR=127.0.0.1 SMDDP_MASTER_PORT="$port"
check_env bad-timeout 'SMDDP_TIMEOUT' SMDDP_RANK=0 SMDDP_WORLD_SIZE=1 SMDDP_MASTER_ADDR=127.0.0.1 SMDDP_MASTER_PORT="$port" SMDDP_TIMEOUT=soon

# Settings that decide a call's steps differ between ranks (rank 0 only):
# every rank fails smddp_init naming the setting, not a later call.
for v in SMDDP_CHECK_COLL=1 SMDDP_SINGLE_COPY_MIN=0; do
	name=differ-${v%%=*}
	run_job "$name" 30 3 --env SMDDP_TIMEOUT=20 /bin/sh \
		"$top_srcdir/tests/integration/rank0-env.sh" "$v" "$FAULT" init
	[ "$status" -ne 0 ] && pass "$name: exit $status" || fail "$name: exit 0"
	n=$(grep -c "${v%%=*} is .* on rank .* but .* on rank 0" "$TDIR/$name.out")
	[ "$n" -ge 3 ] && pass "$name: every rank named the setting" ||
		fail "$name: $n of 3 ranks named the setting"
done
finish
