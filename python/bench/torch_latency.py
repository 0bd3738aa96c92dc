"""torch_latency.py - a small CUDA all_reduce through torch: smddp against NCCL, side by side in one run.

Run 2 ranks sharing one GPU under the CUDA MPS daemon, as
tests/gpu/torch-cuda.sh does:

    smddp-run -n 2 python python/bench/torch_latency.py

Three paths take turns, block by block, REPEATS times:
  smddp         the "smddp" backend, its collectives issued on the
                caller's thread (libsmddp in the queued mode: under MPS)
  smddp-worker  the same group with every CUDA work handed to the group's
                worker thread (smddp.torch._set_cuda_inline(False)): the
                path all CUDA work took before
  nccl          an NCCL group over the same ranks.  NCCL refuses two ranks
                on one GPU of one host, so each rank sets NCCL_HOSTID to a
                value of its own before NCCL starts: NCCL takes them for
                two hosts (its socket transport on loopback); libsmddp
                still sees one node.
Two times per size and path, each the median over the blocks, in
microseconds per call: "loop" = ITERS calls back to back, then one
torch.cuda.synchronize(); "sync" = each call followed by
torch.cuda.synchronize() (a call's whole round trip).  ratio = nccl's /
smddp's loop time (above 1: smddp faster).  Rank 0 prints, then each rank
says which thread ran its smddp calls (smddp.torch._cuda_path_stats).
Environment: REPEATS (default 9), ITERS (default 200), SIZES (bytes,
comma-separated; default 8,1024,65536,262144,1048576), NO_NCCL=1 (skip it).
Exit 1 when the smddp path did not run its calls on the caller's thread.
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import smddp.torch

REPEATS = int(os.environ.get("REPEATS", "9"))
ITERS = int(os.environ.get("ITERS", "200"))
SIZES = [int(s) for s in os.environ.get("SIZES", "8,1024,65536,262144,1048576").split(",")]

dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", R)) % torch.cuda.device_count())
dev = torch.device("cuda", torch.cuda.current_device())
paths = {"smddp": None, "smddp-worker": None}
if os.environ.get("NO_NCCL") != "1":
    # Before NCCL's first call, which reads it.
    os.environ["NCCL_HOSTID"] = f"smddp-latency-rank{R}"
    paths["nccl"] = dist.new_group(backend="nccl")
host = dist.new_group(backend="gloo")  # lines the ranks up between blocks


def say(*a):
    if R == 0:
        print(*a, flush=True)


def run(name, x, sync_each):
    g = paths[name]
    smddp.torch._set_cuda_inline(name != "smddp-worker")
    for _ in range(5):  # warm
        dist.all_reduce(x, group=g)
    torch.cuda.synchronize()
    dist.barrier(group=host)
    iters = ITERS if not sync_each else max(20, ITERS // 4)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x, group=g)
        if sync_each:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


nccl_version = torch.cuda.nccl.version() if "nccl" in paths else "-"
if isinstance(nccl_version, tuple):
    nccl_version = ".".join(map(str, nccl_version))
say(f"# torch.distributed.all_reduce float32 sum on CUDA, {N} ranks, "
    f"{torch.cuda.get_device_name()}, torch {torch.__version__}, NCCL {nccl_version}, "
    f"CUDA_MPS_PIPE_DIRECTORY={os.environ.get('CUDA_MPS_PIPE_DIRECTORY', '-')}; "
    f"median of {REPEATS} blocks; us per call")
head = f"{'bytes':>9}"
for name in paths:
    head += f" {name + '_loop':>18} {name + '_sync':>18}"
say(head + (f" {'nccl/smddp':>10}" if "nccl" in paths else ""))
for size in SIZES:
    x = torch.ones(max(1, size // 4), device=dev)
    times = {(p, s): [] for p in paths for s in (False, True)}
    for _ in range(REPEATS):
        for p in paths:
            for s in (False, True):
                times[(p, s)].append(run(p, x, s))
    med = {k: statistics.median(v) for k, v in times.items()}
    line = f"{size:>9}"
    for p in paths:
        line += f" {med[(p, False)]:>18.1f} {med[(p, True)]:>18.1f}"
    if "nccl" in paths:
        line += f" {med[('nccl', False)] / med[('smddp', False)]:>9.2f}x"
    say(line)
smddp.torch._set_cuda_inline(True)
st = smddp.torch._cuda_path_stats()
print(f"rank {R}: smddp CUDA works: {st}", flush=True)
ok = st["mode"] == "queued" and st["inline"] > 0
if not ok:
    print(f"rank {R}: the smddp path did not run on the caller's thread "
          f"(libsmddp in the {st['mode']} mode: is MPS running?)", flush=True)
sys.stdout.flush()
dist.destroy_process_group()
os._exit(0 if ok else 1)
