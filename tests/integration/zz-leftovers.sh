# zz-leftovers.sh - runs after every other test: no /dev/shm/smddp-* segment and no test process may remain.
#
# Other builds may run jobs on this machine at the same time, so a process
# counts only when it runs from this build tree, and a segment only when no
# live process of another build holds it.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
set -u
: "${top_builddir:?top_builddir is not set: run me through make check}"

names='^(lt-)?(conformance|fault|shrink|smddp-run)$'

ours() { # pid: does it run from this build tree?
	local exe cmd
	exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
	cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)
	case "$exe $cmd" in *"$top_builddir"/*) return 0 ;; esac
	return 1
}

holders() { # segment path: pids that map it or hold it open
	local p
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" = $$ ] && continue
		if grep -qF -- "$1" "/proc/$p/maps" 2>/dev/null ||
			ls -l "/proc/$p/fd" 2>/dev/null | grep -qF -- "$1"; then
			echo "$p"
		fi
	done
}

scan() {
	found=""
	local p comm seg h
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" = $$ ] && continue
		comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
		if [[ $comm =~ $names ]] && ours "$p"; then
			found+="process $p ($comm): $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"$'\n'
		fi
	done
	for seg in /dev/shm/smddp-*; do
		[ -e "$seg" ] || continue
		h=$(holders "$seg" | tr '\n' ' ')
		if [ -z "$h" ]; then
			found+="segment $seg ($(stat -c '%s bytes, modified %y' "$seg")), held by no process"$'\n'
		else
			local mine=0 q
			for q in $h; do ours "$q" && mine=1; done
			if [ $mine = 1 ]; then
				found+="segment $seg, held by this build's process(es) $h"$'\n'
			else
				echo "note: $seg is in use by another job (pids $h); not ours"
			fi
		fi
	done
}

# Processes of the last test may still be on their way out.
for _ in 1 2 3 4 5 6 7 8 9 10; do
	scan
	[ -z "$found" ] && break
	sleep 0.5
done
if [ -n "$found" ]; then
	echo "FAIL: left behind after the tests:"
	printf '%s' "$found" | sed 's/^/    /'
	exit 1
fi
echo "ok: no /dev/shm/smddp-* segment and no test process left"
exit 0
