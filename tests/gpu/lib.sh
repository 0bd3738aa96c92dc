# tests/gpu/lib.sh - helpers of the GPU tests (sourced): skip without a CUDA build or a GPU.
set -u
: "${top_builddir:?top_builddir is not set: run me through make check}"
: "${top_srcdir:?top_srcdir is not set: run me through make check}"
# run-on-device.sh points these at the real binaries (no libtool wrappers there).
RUN=${GPU_SMDDP_RUN:-$top_builddir/cmd/smddp-run}
GPUPROG=${GPU_CONFORMANCE_BIN:-$top_builddir/tests/gpu/gpu-conformance}
if [ ! -x "$GPUPROG" ]; then
	echo "SKIP: built without CUDA (configure --with-cuda builds the GPU tests)"
	exit 77
fi
if ! { [ -e /dev/nvidia0 ] || [ -e /dev/nvidiactl ]; } || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
	echo "SKIP: no NVIDIA GPU on this machine (lab/gpu/run-on-device.sh runs these on one)"
	exit 77
fi
TDIR=$(mktemp -d "${TMPDIR:-/tmp}/smddp-gpu.XXXXXX")
trap 'rm -rf "$TDIR"' EXIT
# fail counts and goes on; pass, finish
FAIL_GOES_ON=1
. "$top_srcdir/tests/lib.sh"

# run_gpu NAME SECONDS NRANKS [smddp-run options --] ARGS...: output in $TDIR/NAME.out, status in $status
run_gpu() {
	local name=$1 secs=$2 n=$3
	shift 3
	# GPU_WRAP: a command that runs the program (tests/net/fakehost.sh)
	timeout -k 5 $((secs + 30)) "$RUN" -n "$n" --timeout "$secs" ${LAUNCH_OPTS:-} \
		${GPU_WRAP:-} "$GPUPROG" "$@" >"$TDIR/$name.out" 2>&1
	status=$?
	echo "--- $name: $n ranks: gpu-conformance $* -> exit $status"
	sed 's/^/    /' "$TDIR/$name.out"
}

