#!/bin/bash
# tests/topo/text.sh - the text view of each sysroot fixture, against the expected output
. "$top_srcdir/tests/topo/lib.sh"

for f in vm two-socket; do
	topo --sysroot "$SYSROOT/$f"
	[ "$rc" -eq 0 ] || fail "$f: exit status $rc: $(cat "$T/err")"
	[ ! -s "$T/err" ] || fail "$f: stderr: $(cat "$T/err")"
	same "text of $f" "$D/expected/$f.txt" "$T/out"
done

# The GPU matrix is there only when there are GPUs.
grep -q 'CPU Affinity' "$D/expected/two-socket.txt" || fail "two-socket: no GPU matrix"
! grep -q 'CPU Affinity' "$D/expected/vm.txt" || fail "vm: a GPU matrix without GPUs"
# The locality the fixture was built with (mk-two-socket.sh): each GPU shares a
# PCIe switch with one NIC, the other socket is SYS, the ENA on GPU1's host bridge PHB.
grep -q '^GPU0    X      SYS    PIX    SYS    SYS    0-3,8-11       0$' "$T/out" ||
	fail "two-socket: GPU0 row: $(grep '^GPU0 ' "$T/out")"
grep -q '^GPU1    SYS    X      SYS    PHB    PIX    4-7,12-15      1$' "$T/out" ||
	fail "two-socket: GPU1 row: $(grep '^GPU1 ' "$T/out")"
# lo (virtual) and the NVIDIA audio function are not listed
! grep -qw 'lo' "$T/out" || fail "two-socket: lo listed"
grep -q '^GPUs: 2$' "$T/out" || fail "two-socket: not 2 GPUs"

# A tree with real symlinks (cp -a of a capture) reads as the link files do,
# and a link loop is given up on, not followed forever.
cp -r "$SYSROOT/two-socket" "$T/ts"
grep -rl '^!<symlink>' "$T/ts" >"$T/links"
[ "$(wc -l <"$T/links")" -gt 20 ] || fail "two-socket: link files missing"
while read -r f; do
	t=$(sed 's/^!<symlink>//' "$f")
	rm "$f"
	ln -s "$t" "$f"
done <"$T/links"
ln -s loop "$T/ts/sys/class/net/loop"
printf '!<symlink>loop2\n' >"$T/ts/sys/class/net/loop2"
topo --sysroot "$T/ts"
[ "$rc" -eq 0 ] || fail "symlinks: exit status $rc: $(cat "$T/err")"
same "two-socket with symlinks" "$D/expected/two-socket.txt" "$T/out"
exit 0
