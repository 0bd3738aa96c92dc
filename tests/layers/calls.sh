#!/bin/bash
# tests/layers/calls.sh - no two files of libsmddp call each other, checked on the objects
#
# usage: tests/layers/calls.sh [BUILDDIR [SRCDIR]]   (make check runs it;
#        BUILDDIR defaults to $top_builddir, SRCDIR to $top_srcdir, else
#        the tree this script is in)
#
# check.sh sees includes; this sees calls, which an include does not show
# (a declaration that a lower header carries for a higher layer, an extern
# written by hand).  It reads the libtool objects of libsmddp (every .lo
# under BUILDDIR/lib names its PIC object), asks nm which global symbols
# each one defines and which it uses, and fails when file A uses a symbol
# that file B defines while B uses one that A defines: a two-way call,
# which makes A and B one unit in all but name (neither can be read,
# tested or moved without the other); and when files call each other
# round a longer circle (A -> B -> C -> A), naming its files and arrows.  Calls through a function pointer
# are not seen, which is the point: a lower file that needs the upper one
# takes a callback.  It also fails on a line of tests/layers/calls-allow
# that names no such pair any more (that list only shrinks).
#
# Exit 77 (skipped) when the objects are not there, e.g. before a build.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-${top_builddir:-$here/build}}
src=$(cd "${2:-${top_srcdir:-$here}}" && pwd) || exit 99
allow=$src/tests/layers/calls-allow

command -v nm >/dev/null || { echo "SKIP: no nm on PATH to read the objects with"; exit 77; }
[ -f "$allow" ] || { echo "ERROR: $src has no tests/layers/calls-allow"; exit 99; }
[ -d "$build/lib" ] || { echo "SKIP: no $build/lib: build libsmddp first (the check reads its objects)"; exit 77; }

# One line per object of the library: "SOURCE OBJECT".  The libtool object
# lib/coll/libsmddp_core_la-coll.lo names lib/coll/.libs/libsmddp_core_la-coll.o,
# built from lib/coll/coll.c; SOURCE is that file, relative to SRCDIR.
objects=$(
	cd "$build" || exit
	find lib -name '*.lo' | LC_ALL=C sort | while IFS= read -r lo; do
		pic=$(sed -n "s/^pic_object='\(.*\)'$/\1/p" "$lo")
		[ -n "$pic" ] && [ "$pic" != none ] || continue
		dir=${lo%/*}
		[ -f "$dir/$pic" ] || continue
		base=${lo##*/}
		base=${base%.lo}
		base=${base#*_la-}
		s=""
		for ext in c cu cc; do
			if [ -f "$src/$dir/$base.$ext" ]; then
				s=$dir/$base.$ext
				break
			fi
		done
		echo "${s:-$dir/$base.o} $build/$dir/$pic"
	done
)
[ -n "$objects" ] || { echo "SKIP: no objects of libsmddp under $build/lib: build it first"; exit 77; }
nobj=$(grep -c . <<<"$objects")

# "D SOURCE SYMBOL" for each global symbol an object defines, "U SOURCE
# SYMBOL" for each it uses; then the pairs of sources that use each other.
symbols=$(
	while read -r s o; do
		nm -P -g --defined-only "$o" | awk -v s="$s" '{ print "D " s " " $1 }'
		nm -P -u "$o" | awk -v s="$s" '{ print "U " s " " $1 }'
	done <<<"$objects"
)
pairs=$(
	awk '
	$1 == "D" { def[$3] = $2; next }
	$1 == "U" { use[NR] = $2 " " $3; next }
	END {
		for (i in use) {
			split(use[i], w, " ")
			a = w[1]; sym = w[2]
			if (!(sym in def) || def[sym] == a)
				continue
			b = def[sym]
			k = a SUBSEP b
			if (!(k in seen) || index(" " syms[k] " ", " " sym " ") == 0) {
				syms[k] = (k in seen) ? syms[k] " " sym : sym
				seen[k] = 1
			}
		}
		for (k in seen) {
			split(k, ab, SUBSEP)
			r = ab[2] SUBSEP ab[1]
			if ((r in seen) && ab[1] < ab[2])
				print ab[1] " " ab[2] "\t" syms[k] "\t" syms[r]
		}
	}' <<<"$symbols" | LC_ALL=C sort
)
# "A B" for each file A that uses a symbol of file B: the graph in which a
# longer circle (A -> B -> C -> A) is looked for.
edges=$(awk '
	$1 == "D" { def[$3] = $2; next }
	$1 == "U" { use[NR] = $2 " " $3 }
	END {
		for (i in use) {
			split(use[i], w, " ")
			if ((w[2] in def) && def[w[2]] != w[1])
				print w[1] " " def[w[2]]
		}
	}' <<<"$symbols" | LC_ALL=C sort -u)

bad=0
# The allowlist: "A B" of each line (A before B in C order), comments and reasons dropped.
allowed=$(sed -e 's/#.*//' "$allow" | awk 'NF >= 2 { if ($1 < $2) print $1 " " $2; else print $2 " " $1 }' | LC_ALL=C sort -u)

while IFS=$'\t' read -r ab ab_syms ba_syms; do
	[ -n "$ab" ] || continue
	grep -qxF "$ab" <<<"$allowed" && continue
	a=${ab% *}
	b=${ab#* }
	echo "FAIL: $a and $b call each other"
	echo "  $a -> $b: $(sort <<<"${ab_syms// /$'\n'}" | paste -sd' ')"
	echo "  $b -> $a: $(sort <<<"${ba_syms// /$'\n'}" | paste -sd' ')"
	bad=1
done <<<"$pairs"

while IFS= read -r a; do
	[ -n "$a" ] || continue
	if ! cut -f1 <<<"$pairs" | grep -qxF "$a"; then
		echo "FAIL: tests/layers/calls-allow lists '$a', which no longer call each other: delete that line"
		bad=1
	fi
done <<<"$allowed"

# Longer circles: tsort names the files of one.  The pairs above are
# circles too; they are told there, with their symbols.
if [ -n "$edges" ]; then
	loop=$(tsort <<<"$edges" 2>&1 >/dev/null | grep -v 'input contains a loop' | sed 's/^tsort: //')
	if [ -n "$loop" ] && [ "$(grep -c . <<<"$loop")" -gt 2 ]; then
		echo "FAIL: files call each other round a circle:" $loop
		while read -r a b; do
			grep -qxF "$a" <<<"$loop" && grep -qxF "$b" <<<"$loop" && echo "  $a -> $b"
		done <<<"$edges"
		bad=1
	fi
fi

npairs=$(grep -c . <<<"$pairs")
nallow=$(grep -c . <<<"$allowed")
if [ "$bad" -ne 0 ]; then
	echo "calls: $npairs pairs of files call each other ($nallow are allowed), in $nobj objects."
	echo "Calls point one way: a file that needs the one that calls it takes a"
	echo "callback, or what both need moves to a file below both (docs/internals/LAYERS.md)."
	exit 1
fi
echo "ok: no two of the $nobj objects of libsmddp call each other (nor round a circle), but for $nallow listed in tests/layers/calls-allow"
exit 0
