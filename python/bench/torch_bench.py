"""torch_bench.py - the smddp backend against gloo, side by side in one run.

Run one process per rank (env://): smddp-run -n 2 python torch_bench.py [allreduce|ddp|all]
  allreduce  dist.all_reduce of float32 tensors from 64 KiB to 256 MiB
  ddp        one DDP training step (forward, backward with the gradient
             all-reduce overlapped, optimizer) of an MLP of about 8 M
             parameters, batch 8, one thread per rank
The two backends take turns, block by block, REPEATS times; each row is the
median over the blocks; ratio = gloo's time / smddp's.  Rank 0 prints.
Environment: REPEATS (default 7), DEVICE (cpu or cuda; cuda: one GPU per
rank, or ranks sharing GPU 0), DDP_WIDTH (default 2048: 4 layers of
WIDTH x WIDTH), DDP_STEPS (default 5 per block).
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import smddp.torch  # noqa: F401
from benchlib import mlp

REPEATS = int(os.environ.get("REPEATS", "7"))
DEVICE = os.environ.get("DEVICE", "cpu")
torch.set_num_threads(1)
dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
if DEVICE == "cuda":
    torch.cuda.set_device(R % torch.cuda.device_count())
dev = torch.device(DEVICE, torch.cuda.current_device()) if DEVICE == "cuda" else torch.device("cpu")
groups = {"smddp": None, "gloo": dist.new_group(backend="gloo")}


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def say(*a):
    if R == 0:
        print(*a, flush=True)


def bench_allreduce():
    say(f"# torch.distributed.all_reduce float32 sum, {N} ranks, {DEVICE}, torch {torch.__version__}; "
        f"median of {REPEATS} blocks; time in ms; ratio = gloo / smddp")
    say(f"{'size':>10} {'smddp_ms':>10} {'gloo_ms':>10} {'ratio':>7} {'smddp_GB/s':>11}")
    for size in [64 << 10, 1 << 20, 8 << 20, 64 << 20, 256 << 20]:
        x = torch.ones(size // 4, device=dev)
        iters = max(2, min(50, (256 << 20) // size // 2))
        times = {k: [] for k in groups}
        for _ in range(REPEATS):
            for name, g in groups.items():
                dist.all_reduce(x, group=g)  # warm
                sync()
                dist.barrier(group=groups["gloo"])
                t0 = time.perf_counter()
                for _ in range(iters):
                    dist.all_reduce(x, group=g)
                sync()
                times[name].append((time.perf_counter() - t0) / iters * 1e3)
        s, g = statistics.median(times["smddp"]), statistics.median(times["gloo"])
        busbw = 2 * (N - 1) / N * size / (s / 1e3) / 1e9
        say(f"{size:>10} {s:>10.3f} {g:>10.3f} {g / s:>6.2f}x {busbw:>11.2f}")


def bench_ddp():
    width = int(os.environ.get("DDP_WIDTH", "2048"))
    steps = int(os.environ.get("DDP_STEPS", "5"))

    def model():
        return mlp(width, dev)

    nparam = sum(p.numel() for p in model().parameters())
    x = torch.randn(8, width, device=dev)
    y = torch.randn(8, width, device=dev)
    nets = {}
    for name, g in groups.items():
        m = DDP(model(), process_group=g)
        nets[name] = (m, torch.optim.SGD(m.parameters(), lr=1e-4))

    def no_comm(state, bucket):
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    # DDP with a hook that communicates nothing: the floor of a DDP step
    m = DDP(model(), process_group=groups["gloo"])
    m.register_comm_hook(None, no_comm)
    nets["ddp_nocomm"] = (m, torch.optim.SGD(m.parameters(), lr=1e-4))
    # compute alone, no communication: what the overlap can hide behind
    plain = model()
    popt = torch.optim.SGD(plain.parameters(), lr=1e-4)
    kinds = list(groups) + ["compute", "ddp_nocomm"]
    times = {k: [] for k in kinds}
    for _ in range(REPEATS):
        for name in kinds:
            m, opt = nets[name] if name != "compute" else (plain, popt)
            for i in range(steps + 1):
                if i == 1:
                    sync()
                    dist.barrier(group=groups["gloo"])
                    t0 = time.perf_counter()
                opt.zero_grad()
                nn.functional.mse_loss(m(x), y).backward()
                opt.step()
            sync()
            times[name].append((time.perf_counter() - t0) / steps * 1e3)
    s, g = statistics.median(times["smddp"]), statistics.median(times["gloo"])
    c = statistics.median(times["compute"])
    nc = statistics.median(times["ddp_nocomm"])
    say(f"# DDP step, MLP of {nparam / 1e6:.1f} M parameters ({nparam * 4 / 2**20:.0f} MiB of "
        f"gradients), batch 8, {N} ranks, {DEVICE}, one thread per rank, torch {torch.__version__}; "
        f"median of {REPEATS} blocks of {steps} steps")
    say(f"{'smddp_ms':>10} {'gloo_ms':>10} {'ratio':>7} {'no_ddp_ms':>10} {'ddp_no_comm_ms':>15}")
    say(f"{s:>10.1f} {g:>10.1f} {g / s:>6.2f}x {c:>10.1f} {nc:>15.1f}")


what = sys.argv[1] if len(sys.argv) > 1 else "all"
if what in ("allreduce", "all"):
    bench_allreduce()
if what in ("ddp", "all"):
    bench_ddp()
dist.destroy_process_group()
# Leave without the interpreter's teardown: gloo's worker threads can still
# drop tensors then and abort the process (torch's, not the backend's).
sys.stdout.flush()
os._exit(0)
