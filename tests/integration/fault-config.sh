# fault-config.sh - a bad SMDDP_CONFIG file (invalid JSON, unknown key, wrong type) makes
# smddp_init return SMDDP_ECONFIG with a message naming the file and the key.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"

port=$("$FAULT" freeport) || { echo "ERROR: no free port"; exit 99; }
one="SMDDP_RANK=0 SMDDP_WORLD_SIZE=1 SMDDP_MASTER_ADDR=127.0.0.1 SMDDP_MASTER_PORT=$port SMDDP_TIMEOUT=10"

# check_config NAME JSON EXPECTED-RC WORDS...
check_config() {
	local name=$1 json=$2 want=$3 w
	shift 3
	printf '%s\n' "$json" >"$TDIR/$name.json"
	# shellcheck disable=SC2086
	run_alone "$name" 30 $one SMDDP_CONFIG="$TDIR/$name.json" -- "$FAULT" init
	if [ "$status" -eq "$want" ]; then pass "$name: exit $status"; else fail "$name: exit $status, expected $want"; fi
	for w in "$@"; do
		if grep -qF -- "$w" "$TDIR/$name.out"; then
			pass "$name: the message mentions $w"
		else
			fail "$name: the message does not mention $w"
		fi
	done
}

check_config good '{"timeout": 30}' 0
check_config invalid-json '{"timeout": 30,' 11 "$TDIR/invalid-json.json"
check_config unknown-key '{"timeout": 30, "no_such_key_xyz": 1}' 11 "$TDIR/unknown-key.json" no_such_key_xyz
check_config wrong-type '{"timeout": [1, 2]}' 11 "$TDIR/wrong-type.json" timeout
check_config wrong-type-string '{"timeout": "soon"}' 11 "$TDIR/wrong-type-string.json" timeout
check_config not-an-object '[1, 2, 3]' 11 "$TDIR/not-an-object.json"
finish
