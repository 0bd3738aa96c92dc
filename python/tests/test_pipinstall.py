"""test_pipinstall.py - the backend that pip install bundled libsmddp into runs.

One process per rank (smddp-run -n N, the console script pip installed).
Each rank checks that the libsmddp it loaded is the copy beside smddp._C
(found through the rpath $ORIGIN, no LD_LIBRARY_PATH), then runs all_reduce
SUM and MAX on the smddp world and the same on a gloo group, and compares.
"""
import os

import torch
import torch.distributed as dist

import smddp
import smddp.torch
from common import check, finish, same


def loaded(name):
    with open("/proc/self/maps", encoding="utf-8") as f:
        return sorted({ln.split(None, 5)[5].strip() for ln in f
                       if len(ln.split(None, 5)) == 6 and name in ln})


pkg = os.path.dirname(os.path.realpath(smddp.__file__))
libs = loaded("libsmddp.so")
check(len(libs) == 1 and os.path.dirname(os.path.realpath(libs[0])) == pkg,
      f"libsmddp loaded from {libs}, not from the package folder {pkg}")
check("LD_LIBRARY_PATH" not in os.environ, "LD_LIBRARY_PATH is set")
check(smddp.torch.library_version() is not None, "no libsmddp version")

dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
    for count in (1, 1000, 100003):
        x = torch.arange(count, dtype=torch.float32) * (R + 1) + R
        mine, ref = x.clone(), x.clone()
        dist.all_reduce(mine, op=op)
        dist.all_reduce(ref, op=op, group=gloo)
        check(same(mine, ref), f"all_reduce {op} of {count} floats differs from gloo")
finish(f"libsmddp={libs[0] if libs else None}")
