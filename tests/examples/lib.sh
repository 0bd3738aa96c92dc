# lib.sh - what the examples' tests share (sourced by tests/examples/*.sh, not run).
#
# The C examples' tests (allreduce.sh, shrink.sh) source tests/lib.sh first
# and build their program as a user does:
#
#   build_example NAME   examples/Makefile builds NAME into $T, a fresh folder
#                        removed on exit (with $T_CLEANUP, a command, if set),
#                        through pkg-config, which must find the build tree's
#                        smddp-uninstalled.pc (its libdir in $libdir, put on
#                        LD_LIBRARY_PATH); skips without pkg-config or make.
#
# The torch examples' tests source tests/torch/lib.sh first. Each runs an
# example on backend "smddp", then the same on gloo, and compares the
# parameters the two saved (tests/examples/params_compare.py): bit for bit
# on CPU tensors, 2 ranks (a sum of two rounds the same in any order),
# within the example's documented tolerance otherwise.
#
#   need_torch WHAT CODE      skip unless python code CODE runs with this
#                             torch, which has no WHAT otherwise
#   against_gloo NAME SECONDS SCRIPT ARGS...
#                             examples/torch/SCRIPT ARGS on 2 ranks, smddp then
#                             gloo (--backend B --save $TDIR/NAME-B.pt): each
#                             job's ranks agree, and the two jobs' parameters
#   ranks_agree NAME N        job NAME's N ranks printed one parameter checksum
#   same_params WHAT RTOL A B params_compare.py A B, passed or failed as WHAT
: "${top_builddir:?top_builddir is not set: run me through make check}"
: "${top_srcdir:?top_srcdir is not set: run me through make check}"
E=$top_srcdir/examples
# the jobs' deadline, and smddp-run by name (the Slurm and Kubernetes examples call it so)
export SMDDP_TIMEOUT=120 PATH=$top_builddir/cmd:$PATH

build_example() {
	command -v pkg-config >/dev/null || skip "pkg-config is not installed"
	command -v make >/dev/null || skip "make is not installed"
	[ -f "$top_builddir/smddp-uninstalled.pc" ] || fail "$top_builddir/smddp-uninstalled.pc is not built"
	T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-examples-test.XXXXXX") || exit 99
	trap 'rm -rf "$T"; '"${T_CLEANUP:-}" EXIT
	trap 'exit 1' INT TERM HUP
	export PKG_CONFIG_PATH=$top_builddir
	# pkg-config takes smddp-uninstalled.pc over an installed smddp.pc
	libdir=$(pkg-config --variable=libdir smddp)
	[ "$libdir" = "$top_builddir/lib/.libs" ] || fail "pkg-config's smddp is not the build tree's: libdir=$libdir"
	export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	# The example's own Makefile, run out of its folder (the source may be
	# read-only, as in make distcheck); not the MAKEFLAGS of the make check
	# around us.
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$T" -f "$E/Makefile" VPATH="$E" "$1" \
		>"$T/make.out" 2>&1 || fail "make -f examples/Makefile $1: $(cat "$T/make.out")"
	[ -x "$T/$1" ] || fail "no $1 after make: $(cat "$T/make.out")"
}

need_torch() {
	"$PY" -c "$2" 2>/dev/null && return 0
	echo "SKIP: torch $("$PY" -c 'import torch; print(torch.__version__)') has no $1"
	exit 77
}

against_gloo() {
	local name=$1 secs=$2 script=$3 b
	shift 3
	for b in smddp gloo; do
		run_job "$name-$b" "$secs" 2 "$PY" "$E/torch/$script" "$@" --backend "$b" --save "$TDIR/$name-$b.pt"
		[ "$status" -eq 0 ] && ranks_agree "$name-$b" 2 &&
			pass "examples/torch/$script on $b: 2 ranks, the same parameters" ||
			fail "examples/torch/$script on $b: exit $status, or the ranks' checksums differ"
	done
	same_params "examples/torch/$script: smddp against gloo" 0 "$TDIR/$name-smddp.pt" "$TDIR/$name-gloo.pt"
}

ranks_agree() {
	local c
	c=$(sed -n 's/^.*rank [0-9]* of [0-9]*: parameter checksum //p' "$TDIR/$1.out" | sort | uniq -c)
	[ "$(wc -l <<<"$c")" -eq 1 ] && [ "$(awk '{print $1}' <<<"$c")" = "$2" ]
}

same_params() {
	local out
	if out=$("$PY" "$top_srcdir/tests/examples/params_compare.py" --rtol "$2" "$3" "$4" 2>&1); then
		pass "$1: $out"
	else
		fail "$1: $out"
	fi
}
