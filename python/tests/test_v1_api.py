"""test_v1_api.py - SMDDP's 1.x PyTorch API gives gloo's results.

Run one process per rank (smddp-run).  A script written for
smdistributed.dataparallel 1.x: its imports warn (DeprecationWarning naming
the 1.4+ way), init_process_group() takes no argument, the collectives of
the API (every op, async_op, group.WORLD) equal the same calls on a gloo
group, and its DistributedDataParallel (with no_sync) trains to the
parameters torch's DDP trains to on gloo: bit for bit on 2 ranks, to float
rounding on more.  What the API does not have is refused, saying so.
"""
import os
import warnings

import torch

from common import check, expect_error, finish, same

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import smdistributed.dataparallel.torch.distributed as dist
    from smdistributed.dataparallel.torch.parallel.distributed import (
        DistributedDataParallel as DDP,
    )
import torch.distributed as tdist  # noqa: E402

dep = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
check(any("smdistributed.dataparallel.torch.distributed" in m and "torch_smddp" in m
          and 'init_process_group(backend="smddp")' in m for m in dep),
      f"import of the 1.x distributed module: no DeprecationWarning naming the 1.4+ way: {dep}")
check(any("torch.nn.parallel.DistributedDataParallel" in m for m in dep),
      f"import of the 1.x DistributedDataParallel: no DeprecationWarning: {dep}")

# ---- before init
check(dist.is_available(), "is_available() is False under smddp-run")
check(not dist.is_initialized(), "is_initialized() before init_process_group")
expect_error(dist.get_rank, ["init_process_group"], "get_rank before init")
expect_error(lambda: dist.init_process_group(backend="gloo"), ['"smddp"'],
             "init_process_group(backend=gloo)", ValueError)

dist.init_process_group()
dist.init_process_group()  # again: nothing (the HF Trainer calls it before the script)
check(dist.is_initialized(), "is_initialized() after init_process_group")
check(tdist.get_backend() == "smddp", f"the default group runs {tdist.get_backend()}")
R, N = dist.get_rank(), dist.get_world_size()
check(R == int(os.environ["RANK"]) and N == int(os.environ["WORLD_SIZE"]),
      f"rank {R} of {N}, environment {os.environ['RANK']} of {os.environ['WORLD_SIZE']}")
check(dist.get_rank(dist.group.WORLD) == R and dist.get_world_size(group=tdist.group.WORLD) == N,
      "get_rank/get_world_size with group.WORLD")
check(dist.get_local_rank() == int(os.environ["SMDATAPARALLEL_LOCAL_RANK"]),
      f"get_local_rank() {dist.get_local_rank()}")
check(dist.get_local_rank() == int(os.environ["LOCAL_RANK"]), "SMDATAPARALLEL_LOCAL_RANK != LOCAL_RANK")
check(dist.get_local_size() == int(os.environ["LOCAL_WORLD_SIZE"]), "get_local_size()")
gloo = tdist.new_group(backend="gloo")
torch.set_num_threads(1)


def data(dtype, n=37, seed=0):
    """Integer values: sums, minima and maxima are exact in any order."""
    g = torch.Generator().manual_seed(1000 * seed + R)
    return torch.randint(-50, 50, (n,), generator=g).to(dtype)


# ---- all_reduce: every op of the API, sync and async, against gloo
for dtype in (torch.float32, torch.float64, torch.int32, torch.int64):
    for name in ("SUM", "AVERAGE", "MIN", "MAX"):
        if name == "AVERAGE" and not dtype.is_floating_point:
            continue
        for async_op in (False, True):
            t = data(dtype, seed=3)
            work = dist.all_reduce(t, op=getattr(dist.ReduceOp, name), async_op=async_op)
            if async_op:
                check(work is not None, f"all_reduce {name} async_op: no work")
                work.wait()
            else:
                check(work is None, f"all_reduce {name}: returned {work!r}")
            ref = data(dtype, seed=3)
            gop = tdist.ReduceOp.SUM if name == "AVERAGE" else getattr(tdist.ReduceOp, name)
            tdist.all_reduce(ref, op=gop, group=gloo)
            if name == "AVERAGE":
                ref = ref / N
                ok = torch.allclose(t, ref, rtol=1e-6, atol=0)
            else:
                ok = same(t, ref)
            check(ok, f"all_reduce {name} {dtype} async_op={async_op}: {t[:4]} != gloo {ref[:4]}")
t = data(torch.float32, seed=4)
dist.all_reduce(t, group=dist.group.WORLD)  # the default op, group.WORLD given
ref = data(torch.float32, seed=4)
tdist.all_reduce(ref, group=gloo)
check(same(t, ref), "all_reduce with the default op and group.WORLD")

# ---- broadcast, all_gather, all_to_all_single, barrier
for src in range(N):
    for async_op in (False, True):
        t = data(torch.float32, seed=5)
        w = dist.broadcast(t, src=src, async_op=async_op)
        if async_op:
            w.wait()
        ref = data(torch.float32, seed=5)
        tdist.broadcast(ref, src, group=gloo)
        check(same(t, ref), f"broadcast from {src} async_op={async_op}")
for async_op in (False, True):
    out = [torch.empty(37, dtype=torch.float64) for _ in range(N)]
    w = dist.all_gather(out, data(torch.float64, seed=6), async_op=async_op)
    if async_op:
        w.wait()
    ref = [torch.empty(37, dtype=torch.float64) for _ in range(N)]
    tdist.all_gather(ref, data(torch.float64, seed=6), group=gloo)
    check(all(same(a, b) for a, b in zip(out, ref)), f"all_gather async_op={async_op}")
# equal splits, then uneven ones (rank r sends r + j + 1 elements to rank j)
inp = data(torch.float32, n=4 * N, seed=7)
out = torch.empty(4 * N)
dist.all_to_all_single(out, inp)
ref = torch.empty(4 * N)
tdist.all_to_all_single(ref, inp, group=gloo)
check(same(out, ref), "all_to_all_single, equal splits")
in_splits = [R + j + 1 for j in range(N)]
out_splits = [r + R + 1 for r in range(N)]
inp = data(torch.float32, n=sum(in_splits), seed=8)
out = torch.empty(sum(out_splits))
dist.all_to_all_single(out, inp, out_splits, in_splits, async_op=True).wait()
ref = torch.empty(sum(out_splits))
tdist.all_to_all_single(ref, inp, out_splits, in_splits, group=gloo)
check(same(out, ref), "all_to_all_single, uneven splits, async_op")
dist.barrier()
dist.barrier(group=dist.group.WORLD, async_op=True).wait()

# ---- what the 1.x API does not have
expect_error(lambda: dist.all_reduce(torch.ones(2), group=gloo), ["group.WORLD", "new_group"],
             "all_reduce on another group", ValueError)
expect_error(lambda: dist.all_reduce(torch.ones(2), op=tdist.ReduceOp.PRODUCT),
             ["SUM, AVERAGE, MIN or MAX"], "all_reduce PRODUCT", ValueError)
expect_error(lambda: dist.reduce_scatter, ["1.x API", "torch.distributed"],
             "a name the 1.x API lacks", AttributeError)


# ---- DistributedDataParallel: 1.x class on smddp == torch's on gloo
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.bn = torch.nn.BatchNorm1d(32)  # buffers: broadcast_buffers
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.b(torch.relu(self.bn(self.a(x))))


def train(wrap):
    torch.manual_seed(0)
    model = Net()
    m = wrap(model)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(200 + R)
    for i in range(12):
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
        if i % 3 == 0:  # accumulate: every third step's gradient is kept local
            with m.no_sync():
                torch.nn.functional.mse_loss(m(x), y).backward()
            continue
        torch.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
        opt.zero_grad()
    return [t.detach().clone() for t in list(model.parameters()) + list(model.buffers())]


got = train(lambda m: DDP(m, bucket_cap_mb=1))
want = train(lambda m: torch.nn.parallel.DistributedDataParallel(m, process_group=gloo,
                                                                 bucket_cap_mb=1))
for i, (a, b) in enumerate(zip(got, want)):
    ok = same(a, b) if N <= 2 else torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    check(ok, f"DDP tensor {i}: max difference {(a.float() - b.float()).abs().max().item()}")
expect_error(lambda: DDP(Net(), find_unused_parameters=True),
             ["find_unused_parameters", "torch.nn.parallel.DistributedDataParallel"],
             "DDP with an argument 1.x lacks", TypeError)
expect_error(lambda: DDP(Net(), process_group=gloo), ["group.WORLD"],
             "DDP on another group", ValueError)
DDP(Net(), process_group=dist.group.WORLD, broadcast_buffers=False)

finish(f"world={N}")
