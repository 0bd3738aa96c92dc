# lib.sh - what the torch examples' tests share (sourced after tests/torch/lib.sh).
#
# Each test runs an example on backend "smddp", then the same on gloo, and
# compares the parameters the two saved (tests/examples/params_compare.py):
# bit for bit on CPU tensors, 2 ranks (a sum of two rounds the same in any
# order), within the example's documented tolerance otherwise.
E=$top_srcdir/examples/torch
export SMDDP_TIMEOUT=120 PATH=$top_builddir/cmd:$PATH

# ranks_agree NAME N: job NAME's N ranks each printed a parameter checksum,
# the same one (the replicas of a data-parallel job agree)
ranks_agree() {
	local c
	c=$(sed -n 's/^.*rank [0-9]* of [0-9]*: parameter checksum //p' "$TDIR/$1.out" | sort | uniq -c)
	[ "$(wc -l <<<"$c")" -eq 1 ] && [ "$(awk '{print $1}' <<<"$c")" = "$2" ]
}

# same_params WHAT RTOL A B: params_compare.py A B, passed or failed as WHAT
same_params() {
	local out
	if out=$("$PY" "$top_srcdir/tests/examples/params_compare.py" --rtol "$2" "$3" "$4" 2>&1); then
		pass "$1: $out"
	else
		fail "$1: $out"
	fi
}
