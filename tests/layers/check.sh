#!/bin/bash
# tests/layers/check.sh - the layering rule of docs/internals/LAYERS.md, checked on every include
#
# usage: tests/layers/check.sh [SRCDIR]   (make check runs it; SRCDIR
#        defaults to $top_srcdir, else the tree this script is in)
#
# Reads every #include "..." of lib/**/*.{c,h,cu,cuh} and cmd/**/*.{c,h},
# resolves it as the compiler does (the including file's folder, then
# lib/include/, then lib/, then cmd/ for the tools: the -I flags of the
# Makefile.am files; what resolves to
# none, such as the generated config.h, is not ours to check) and fails
#   - on an include in lib/ that points up or across (tests/layers/map)
#     and is not listed in tests/layers/allow;
#   - on a line of tests/layers/allow that names no such include any more
#     (the list only shrinks);
#   - on a file of lib/ that the map puts in no layer;
#   - on folders that include each other, directly or round a longer
#     circle (lib/util -> lib/config -> lib/util), whatever their layers;
#   - on a tool (cmd/) that includes an internal header of lib/: tools use
#     the public API only (lib/include/), and the libc-only units
#     lib/text/ and lib/hash/, which they build into
#     cmd/common/libtoolcommon.a, and lib/clock/ (header only).
set -u
src=${1:-${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}
cd "$src" || exit 99
map=tests/layers/map
allow=tests/layers/allow
[ -f "$map" ] && [ -f "$allow" ] || { echo "ERROR: $src has no $map or $allow"; exit 99; }

# One line per include that resolves into the tree: "FILE INCLUDED-PATH AS-WRITTEN".
includes() {
	local f dir inc cand t
	while IFS= read -r f; do
		dir=${f%/*}
		sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
			while IFS= read -r inc; do
				t=""
				for cand in "$dir/$inc" "lib/include/$inc" "lib/$inc" "cmd/$inc"; do
					if [ -f "$cand" ]; then
						t=$cand
						break
					fi
				done
				[ -n "$t" ] && echo "$f $(realpath -m --relative-to=. "$t") $inc"
			done
	done
}

lib_files=$(find lib -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | LC_ALL=C sort)
cmd_files=$(find cmd -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)

# Judge each include of lib/ against the map; print the ones that break the rule
# as "FILE -> AS-WRITTEN KIND DETAIL", the files in no layer as "UNMAPPED FILE".
violations=$(
	{
		echo "$lib_files" | sed 's/^/FILE /'
		echo "$lib_files" | includes | sed 's/^/INC /'
	} | awk -v mapfile="$map" '
	BEGIN {
		while ((getline line < mapfile) > 0) {
			sub(/#.*/, "", line)
			n = split(line, w, " ")
			if (n < 3)
				continue
			for (i = 3; i <= n; i++) {
				rank[w[i]] = w[1]
				name[w[i]] = w[2]
			}
		}
	}
	# unit(PATH): the longest map PATH naming this file, "" for none
	function unit(p,   best, k) {
		best = ""
		for (k in rank)
			if ((k == p || (k ~ /\/$/ && index(p, k) == 1)) && length(k) > length(best))
				best = k
		return best
	}
	$1 == "FILE" { if (unit($2) == "") print "UNMAPPED " $2; next }
	$1 == "INC" {
		s = unit($2); t = unit($3)
		if (s == "" || t == "" || name[s] == name[t])
			next
		if (rank[t] + 0 > rank[s] + 0)
			print $2 " -> " $4 " up " name[s] " (" rank[s] ") includes " name[t] " (" rank[t] ")"
		else if (rank[t] + 0 == rank[s] + 0)
			print $2 " -> " $4 " across " name[s] " and " name[t] " are both at rank " rank[s]
	}'
)

bad=0
# The allowlist: "SOURCE -> HEADER" of each line, comments and reasons dropped.
allowed=$(sed -e 's/#.*//' "$allow" | awk 'NF >= 3 && $2 == "->" { print $1 " -> " $3 }' | LC_ALL=C sort -u)
found=$(echo "$violations" | grep -v '^UNMAPPED ' | grep -v '^$' | LC_ALL=C sort)

while IFS= read -r v; do
	[ -n "$v" ] || continue
	key=$(awk '{ print $1 " -> " $3 }' <<<"$v")
	if ! grep -qxF "$key" <<<"$allowed"; then
		echo "FAIL: $v"
		bad=1
	fi
done <<<"$found"

while IFS= read -r a; do
	[ -n "$a" ] || continue
	if ! awk '{ print $1 " -> " $3 }' <<<"$found" | grep -qxF "$a"; then
		echo "FAIL: $allow lists '$a', which no longer points up or across: delete that line"
		bad=1
	fi
done <<<"$allowed"

while IFS= read -r u; do
	[ -n "$u" ] || continue
	echo "FAIL: ${u#UNMAPPED } is in no layer: give its folder a line in $map"
	bad=1
done < <(echo "$violations" | grep '^UNMAPPED ')

# Folders: no circle, in lib/ nor cmd/ (tsort names the folders of one).
folder_edges=$(printf '%s\n%s\n' "$lib_files" "$cmd_files" | grep . | includes |
	awk '{ s = $1; t = $2; sub(/\/[^\/]*$/, "", s); sub(/\/[^\/]*$/, "", t); if (s != t) print s, t }' |
	LC_ALL=C sort -u)
if [ -n "$folder_edges" ]; then
	loop=$(tsort <<<"$folder_edges" 2>&1 >/dev/null | grep -v 'input contains a loop')
	if [ -n "$loop" ]; then
		echo "FAIL: folders include each other in a circle:" $(sed 's/^tsort: //' <<<"$loop")
		while read -r a b; do
			grep -qxF "$a" <<<"$(sed 's/^tsort: //' <<<"$loop")" &&
				grep -qxF "$b" <<<"$(sed 's/^tsort: //' <<<"$loop")" &&
				echo "  $a -> $b"
		done <<<"$folder_edges"
		bad=1
	fi
fi

# Tools: the public API only, and lib/text/, lib/hash/ (compiled into the tools)
# and lib/clock/ (header only).
while read -r f t inc; do
	case $t in
	lib/include/* | lib/text/* | lib/hash/* | lib/clock/*) ;;
	lib/*)
		echo "FAIL: $f -> $inc: a tool includes an internal header of the library (use <smddp/smddp.h>)"
		bad=1
		;;
	esac
done < <(echo "$cmd_files" | includes)

nviol=$(grep -c . <<<"$found")
nallow=$(grep -c . <<<"$allowed")
if [ "$bad" -ne 0 ]; then
	echo "layers: the rule is broken ($nviol includes point up or across, $nallow are allowed)."
	echo "A file includes only its own unit or lower ones; a lower layer that needs"
	echo "something from above takes a callback (docs/internals/LAYERS.md)."
	exit 1
fi
echo "ok: no folder circle; every include of lib/ points down or within its unit, but for $nallow listed in $allow; tools include the public API (and lib/text/, lib/hash/, lib/clock/) only"
exit 0
