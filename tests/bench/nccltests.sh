#!/bin/bash
# tests/bench/nccltests.sh - nccl-tests' command lines: their options accepted (and the
# ignored ones named), -C report_cputime beside the old -C NAME, --coll, -T, and the
# collective taken from a program name such as all_gather_perf
. "$top_srcdir/tests/bench/lib.sh"

small=(-b 1K -e 4K -f 4 -n 2 -w 1)

# ---- every option of an nccl-tests command line runs; the ignored ones are named
bench 2 "${small[@]}" -g 1 -t 1 -z 1 -a 1 -m 2 -G 10 -p 0 -y 0 -R 1 -T 60 -C 0
expect_clean_table "nccl-tests options"
grep -qx '# nccl-tests options accepted and ignored: -a 1 -m 2 -G 10 -p 0 -y 0 -R 1' "$T/out" ||
	fail "ignored options not named: $(head -n 5 "$T/out")"
grep -q '^#  *size  *count .* time .* time ' "$T/out" || fail "-C 0: $(grep size "$T/out")"
bench 2 "${small[@]}" --average=2 --agg_iters 1 --cudagraph 0 --parallel_init 1 \
	--stream_null 1 --local_register 2 --timeout 60 --report_cputime 0
expect_clean_table "nccl-tests long options"
bench 2 "${small[@]}"
! grep -q 'ignored' "$T/out" || fail "an ignored-options line without any: $(head -n 5 "$T/out")"
echo "ok: nccl-tests' options"

# ---- -C 1: the time columns are "cputime"; JSON gets cputime_us; busbw still from time
bench 2 "${small[@]}" -C 1
expect_clean_table "-C 1"
grep -q '^#  *size  *count .* cputime .* cputime ' "$T/out" || fail "-C 1: $(grep size "$T/out")"
grep -q '^# libsmddp .*; cputime (until the call returns): ' "$T/out" || fail "-C 1: $(head -n 4 "$T/out")"
bench 2 "${small[@]}" -C 1 --json
[ "$rc" -eq 0 ] && [ "$(grep -c '"oop_cputime_us":[0-9.]*,.*"ip_cputime_us":[0-9.]*,' "$T/out")" -eq 2 ] ||
	fail "-C 1 --json: $(cat "$T/out" "$T/err")"
bench 2 "${small[@]}" --json
! grep -q cputime "$T/out" || fail "cputime_us without -C 1: $(cat "$T/out")"
echo "ok: -C 1 reports the CPU time"

# ---- the collective: --coll, --collective, and the old -C NAME
for a in "--coll allgather" "--collective allgather" "-C allgather" "--coll=allgather"; do
	# shellcheck disable=SC2086
	bench 2 "${small[@]}" $a
	expect_clean_table "$a"
	[ "$(grep '^# Collective: ' "$T/out")" = "# Collective: allgather (libsmddp)" ] ||
		fail "$a: $(grep '^# Collective' "$T/out")"
done
echo "ok: --coll, --collective, -C NAME"

# ---- -T: a rank that never comes fails the run within the timeout (SMDDP_TIMEOUT)
rc=0
start=$SECONDS
SMDDP_RANK=0 SMDDP_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + $$ % 20000)) \
	SMDDP_TIMEOUT=600 timeout 60 "$BENCH" "${small[@]}" -T 2 >"$T/out" 2>"$T/err" </dev/null || rc=$?
[ "$rc" -eq 1 ] && [ $((SECONDS - start)) -lt 30 ] && grep -q 'within 2 s' "$T/err" ||
	fail "-T 2: exit status $rc after $((SECONDS - start)) s: $(cat "$T/err")"
echo "ok: -T sets the timeout"

# ---- named like nccl-tests' programs (the real binary: libtool's wrapper renames it)
real="$top_builddir/cmd/bench/.libs/smddp-allreduce-bench"
[ -x "$real" ] || real="$BENCH"
if [ "$(head -c 2 "$real")" = '#!' ]; then
	echo "skip: program names: no real binary to link to"
else
	export LD_LIBRARY_PATH="$top_builddir/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	for p in all_reduce_perf:allreduce all_gather_perf:allgather reduce_scatter_perf:reducescatter \
		broadcast_perf:broadcast reduce_perf:reduce alltoall_perf:alltoall sendrecv_perf:sendrecv; do
		ln -s "$real" "$T/${p%%:*}"
		rc=0
		timeout 120 "$RUN" -n 2 --no-tag-output "$T/${p%%:*}" "${small[@]}" >"$T/out" 2>"$T/err" \
			</dev/null || rc=$?
		expect_clean_table "${p%%:*}"
		[ "$(grep '^# Collective: ' "$T/out")" = "# Collective: ${p#*:} (libsmddp)" ] ||
			fail "${p%%:*}: $(grep '^# Collective' "$T/out")"
	done
	# the command line still wins
	timeout 120 "$RUN" -n 2 --no-tag-output "$T/all_gather_perf" "${small[@]}" --coll reduce \
		>"$T/out" 2>"$T/err" </dev/null || fail "all_gather_perf --coll reduce: $(cat "$T/err")"
	grep -q '^# Collective: reduce ' "$T/out" || fail "all_gather_perf --coll reduce: $(cat "$T/out")"
	echo "ok: program names"
fi
exit 0
