"""test_groups.py - sub-groups of the smddp backend, and their creation and teardown.

Run one process per rank (env://), 1 to 4 ranks.  Groups: pairs, even and
odd ranks, overlapping triples, new_subgroups(); each reduces against the
sum computed by hand.  Then 300 cycles of create, use, destroy, torn down in
a different order on odd and even ranks, with no file descriptors or
/dev/shm segments left behind and each destroy immediate.
"""
import gc
import os
import time

import torch
import torch.distributed as dist

from common import check, expect_error, finish

dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()


def reduce_in(group, members):
    x = torch.full((1027,), float(R + 1))
    dist.all_reduce(x, group=group)
    want = float(sum(m + 1 for m in members))
    check(torch.equal(x, torch.full((1027,), want)), f"group {members}: got {x[0].item()}")


def each(groups_of_members):
    """new_group is collective over the world: every rank creates every group."""
    made = [(m, dist.new_group(m, backend="smddp")) for m in groups_of_members]
    for members, g in made:
        if R in members:
            reduce_in(g, members)
    return made


each([[r, r + 1] for r in range(0, N - 1, 2)])                    # pairs
each([list(range(0, N, 2)), list(range(1, N, 2))] if N > 1 else [[0]])  # even, odd
if N >= 3:
    each([list(range(s, s + 3)) for s in range(N - 2)])        # overlapping triples
sub, _ = dist.new_subgroups(group_size=2 if N % 2 == 0 else 1, backend="smddp")
mine = [r for r in range(N) if r // (2 if N % 2 == 0 else 1) == R // (2 if N % 2 == 0 else 1)]
reduce_in(sub, mine)
# a smddp group and a gloo group over the same ranks, used in turn
g2 = dist.new_group(backend="gloo")
for _ in range(3):
    reduce_in(None, list(range(N)))
    reduce_in(g2, list(range(N)))


def fds():
    return len(os.listdir("/proc/self/fd"))


# Only this job's segments (/dev/shm/smddp-JOBID-*): the other tests of a
# parallel make check make and remove theirs meanwhile.
JOB = os.environ.get("SMDDP_JOB_ID")


def shm():
    pre = f"smddp-{JOB}-" if JOB else "smddp-"
    return sorted(f for f in os.listdir("/dev/shm") if f.startswith(pre))


dist.barrier()
# A call on a group that was shut down raises DistBackendError (the
# backend's errors), saying what to do
# (ProcessGroup.shutdown is torch 2.5's and later)
g = dist.new_group(backend="smddp")
dist.all_reduce(torch.ones(2), group=g)
if hasattr(g, "shutdown"):
    g.shutdown()
    expect_error(lambda: dist.all_reduce(torch.ones(2), group=g), ["smddp", "shut down", "new"],
                 "a call after shutdown", kind=dist.DistBackendError)
dist.destroy_process_group(g)
del g

fd0, t0, slowest = fds(), time.monotonic(), 0.0
for i in range(300):
    if i == 20:
        fd20 = fds()
    a = dist.new_group(backend="smddp")
    b = dist.new_group(list(range(N))[::-1], backend="smddp")
    x = torch.ones(8)
    dist.all_reduce(x, group=a)
    dist.all_reduce(x, group=b)
    check(torch.equal(x, torch.full((8,), float(N * N))), f"cycle {i}")
    t = time.monotonic()
    for g in ((a, b) if R % 2 else (b, a)):
        dist.destroy_process_group(g)
    slowest = max(slowest, time.monotonic() - t)
# torch before 2.5 frees a destroyed group's backend with the last reference
# to it, not at destroy_process_group: drop ours.
del a, b
gc.collect()
# A destroy that waited for its peers would wait for the other order's
# destroy until SMDDP_TIMEOUT (120 s); the bound is far below that and far
# above any scheduling delay of a loaded machine.
check(slowest < 30, f"a destroy took {slowest:.1f} s (must be local, not wait for peers)")
# torch 2.4 keeps the last destroyed group or so alive a while: what must
# not happen is growth with the cycles (a leak of one descriptor a cycle
# would be 280 more), so a few descriptors of slack are no loss.
check(fds() <= fd20 + 8 and fds() <= fd0 + 2 * N + 8,
      f"file descriptors: {fd0} before the cycles, {fd20} after 20, {fds()} after 300")
dist.barrier()
left = shm()
check(not left, f"/dev/shm segments left: {left[:5]}")
finish(f"300 cycles in {time.monotonic() - t0:.1f} s, slowest destroy {slowest * 1000:.1f} ms")
