# psm-signals.sh - libinfinipath, which some libfabric builds link (Debian's), catches
# SIGTERM, SIGINT and others at load unless IPATH_NO_BACKTRACE is set, and exits 1 from its
# handler: libsmddp says so at init, and smddp-run sets the variable for its ranks.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
lib=$(ls "$top_builddir"/lib/.libs/libsmddp.so 2>/dev/null)
if [ -z "$lib" ] || ! ldd "$lib" | grep -q libinfinipath; then
	echo "SKIP: this libfabric does not load libinfinipath"
	exit 77
fi
one=(SMDDP_RANK=0 SMDDP_WORLD_SIZE=1 SMDDP_TIMEOUT=30)

run_alone bare 30 "${one[@]}" -- "$FAULT" hang 0 0
grep -q "libinfinipath.* handles SIG[A-Z]* .*IPATH_NO_BACKTRACE=1" "$TDIR/bare.err" &&
	pass "without IPATH_NO_BACKTRACE: the warning names the library and the cure" ||
	fail "without IPATH_NO_BACKTRACE: no warning"
run_alone cured 30 IPATH_NO_BACKTRACE=1 "${one[@]}" -- "$FAULT" hang 0 0
! grep -q "IPATH_NO_BACKTRACE" "$TDIR/cured.err" && pass "with it: no warning" ||
	fail "with IPATH_NO_BACKTRACE=1: $(cat "$TDIR/cured.err")"

# smddp-run sets it for its ranks, unless the user did
out=$(env -u IPATH_NO_BACKTRACE -u HFI_NO_BACKTRACE timeout 60 "$RUN" -n 1 \
	sh -c 'echo "IPATH=$IPATH_NO_BACKTRACE HFI=$HFI_NO_BACKTRACE"')
[ "$out" = "IPATH=1 HFI=1" ] && pass "smddp-run sets both for its ranks" || fail "smddp-run: $out"
out=$(IPATH_NO_BACKTRACE=0 timeout 60 "$RUN" -n 1 sh -c 'echo "IPATH=$IPATH_NO_BACKTRACE"')
[ "$out" = "IPATH=0" ] && pass "a value of the user's stays" || fail "smddp-run: $out"
finish
