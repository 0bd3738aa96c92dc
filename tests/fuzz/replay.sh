# replay.sh - every fuzz target over its corpus (tests/fuzz/corpus/NAME/):
# the seeds and every input that once crashed a parser, in make check.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
set -u
: "${top_builddir:?top_builddir is not set: run me through make check}"
: "${top_srcdir:?top_srcdir is not set: run me through make check}"
FAIL_GOES_ON=1
status=0
. "$top_srcdir/tests/lib.sh"

out=$(mktemp "${TMPDIR:-/tmp}/smddp-fuzz.XXXXXX")
trap 'rm -f "$out"' EXIT
ran=0
for corpus in "$top_srcdir"/tests/fuzz/corpus/*/; do
	corpus=${corpus%/}
	name=${corpus##*/}
	prog=$top_builddir/tests/fuzz/fuzz-$name
	if [ ! -x "$prog" ]; then
		# smddp-check-az's targets need libcurl, as the tool does
		echo "fuzz-$name is not built (configured without what it needs): left out"
		continue
	fi
	ran=$((ran + 1))
	files=("$corpus"/*)
	[ -f "${files[0]}" ] || { fail "$corpus: no seeds"; continue; }
	# file names, not the folder: a libFuzzer build runs each once (given
	# a folder it would fuzz), the plain driver the same
	# The tool targets come back from a tool's exit() by longjmp
	# (exit.h), leaving what the tool held, as its exit would: no leak
	# check there, whatever ASAN_OPTIONS says (make check-sanitize).
	opts=${ASAN_OPTIONS:-}
	case $name in
	hostfile | sagemaker | checkaz | imds) opts=${opts:+$opts:}detect_leaks=0 ;;
	esac
	if ASAN_OPTIONS=$opts timeout -k 5 120 "$prog" "${files[@]}" >"$out" 2>&1; then
		pass "fuzz-$name: ${#files[@]} input(s)"
	else
		tail -n 40 "$out"
		fail "fuzz-$name failed on its corpus (the report above)"
	fi
done
[ "$ran" -gt 0 ] || fail "no fuzz target is built"
finish
