"""torch_threads.py DEVICE [ROUNDS] - collectives of three smddp groups from three threads at once.

Run under smddp-run, 2 or more ranks (tests/gpu/torch-cuda.sh threads; on
CPU tensors too).  Each thread owns a group, so every rank issues each
group's calls in one order, while the threads race each other in the
process: the CUDA works' pooled events (one pool per process), the
caller's-thread path of each group, and the futures a host work makes
only when asked for (get_future() before, during or after the worker
completes it).  Per round, thread k of each rank does on its group:
all_reduce with async_op=False, one with async_op=True then wait(), one
whose future is asked for at once and one asked for after a wait(), and a
broadcast; every result is compared on the device, once at the end.
Prints "THREADS-OK rank=R ..." when every result was right.
"""
import datetime
import faulthandler
import os
import re
import sys
import threading
import time

import torch
import torch.distributed as dist

import smddp.torch  # noqa: F401  (registers the backend)

dev_kind = sys.argv[1] if len(sys.argv) > 1 else "cpu"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 200
# Under the callers' deadlines (tests/gpu/torch-cuda.sh), so a hang is reported.
JOIN_S = float(os.environ.get("THREADS_JOIN_S", "100"))
# The groups' timeout= is their communicators' deadline (docs/torch.md),
# torch's default 30 minutes unless set here.
GROUP_S = os.environ.get("THREADS_GROUP_TIMEOUT_S")
kw = {"timeout": datetime.timedelta(seconds=float(GROUP_S))} if GROUP_S else {}
# THREADS_CROSS_OK=1 (under MPS): two groups' kernels may wait for each
# other in a shared hardware queue, as NCCL's may (docs/torch.md); then a
# thread must fail at the group timeout with an error naming a rank, and
# the others go on.  Wrong data, a hang or another error still fail.
CROSS_OK = os.environ.get("THREADS_CROSS_OK") == "1"
CROSSED = re.compile(r"timed out|gave up|did not arrive")
dist.init_process_group(backend="smddp", **kw)
R, N = dist.get_rank(), dist.get_world_size()
if dev_kind == "cuda":
    local = int(os.environ.get("LOCAL_RANK", R)) % torch.cuda.device_count()
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
else:
    dev = torch.device("cpu")
# Made by every rank in the same order, before the threads start.
groups = [dist.group.WORLD] + [dist.new_group(backend="smddp", **kw) for _ in range(2)]
total = N * (N + 1) // 2
errors = []
bad = [0] * len(groups)


def worker(k):
    try:
        g = groups[k]
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
            # A stream per thread, as with NCCL: calls with async_op=False go
            # on the current stream, and three groups' kernels on one stream,
            # queued in another order on each rank, would wait for each other.
            torch.cuda.set_stream(torch.cuda.Stream())
        wrong = torch.zeros((), dtype=torch.int64, device=dev)
        want = torch.full((17,), float(total), device=dev)
        for i in range(rounds):
            a = torch.full((17,), float(R + 1), device=dev)
            dist.all_reduce(a, group=g)
            b = torch.full((17,), float(R + 1), device=dev)
            dist.all_reduce(b, group=g, async_op=True).wait()
            c = torch.full((17,), float(R + 1), device=dev)
            fc = dist.all_reduce(c, group=g, async_op=True).get_future()
            d = torch.full((17,), float(R + 1), device=dev)
            wd = dist.all_reduce(d, group=g, async_op=True)
            if i % 3 == 0:
                time.sleep(0)  # let the worker finish it before the future is asked
            wd.wait()
            fd = wd.get_future()
            e = torch.full((17,), float(R + i), device=dev)
            dist.broadcast(e, src=i % N, group=g)
            fc.wait()
            fd.wait()
            wrong += (a != want).sum() + (b != want).sum() + (c != want).sum()
            wrong += (d != want).sum() + (e != float(i % N + i)).sum()
            wrong += (fc.value()[0] != want).sum() + (fd.value()[0] != want).sum()
        bad[k] = int(wrong.item())
    except Exception as ex:  # noqa: BLE001 - reported below, with the rank
        errors.append(f"thread {k}: {type(ex).__name__}: {ex}")


t0 = time.monotonic()
threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(groups))]
for t in threads:
    t.start()
end = time.monotonic() + JOIN_S
for t in threads:
    t.join(max(0.0, end - time.monotonic()))
alive = [k for k, t in enumerate(threads) if t.is_alive()]
took = time.monotonic() - t0
crossed = [e for e in errors if CROSS_OK and CROSSED.search(e)]
errors = [e for e in errors if e not in crossed]
if alive or errors or any(bad) or len(crossed) == len(groups):
    if alive:  # where each hung thread is, for the report
        faulthandler.dump_traceback(all_threads=True)
    print(f"THREADS-FAIL rank={R} {dev_kind}: hung threads {alive}, errors {errors[:3]}, "
          f"crossed {crossed[:3]}, wrong elements per thread {bad}", flush=True)
    os._exit(1)
print(f"THREADS-OK rank={R} {dev_kind}: {len(groups)} threads x {rounds} rounds x 5 calls "
      f"in {took:.1f} s", flush=True)
for e in crossed:
    print(f"THREADS-CROSSED rank={R}: {e}", flush=True)
if crossed:  # a failed group cannot be destroyed cleanly by its peers: leave
    os._exit(0)
for g in groups[1:]:
    dist.destroy_process_group(g)
dist.destroy_process_group()
