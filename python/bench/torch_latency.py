"""torch_latency.py - a small all_reduce through torch: smddp against NCCL (or gloo), side by side in one run.

Run 2 ranks sharing one GPU under the CUDA MPS daemon, as
tests/gpu/torch-cuda.sh does:

    smddp-run -n 2 python python/bench/torch_latency.py

On CUDA tensors (DEVICE=cuda, the default) four paths take turns, block
by block, REPEATS times:
  smddp         the "smddp" backend, dist.all_reduce(x): libsmddp in the
                queued mode (under MPS) is called on the caller's thread,
                on its current stream, and no Work comes back (as NCCL
                does for a call that is not async_op)
  smddp-async   the same with async_op=True, then work.wait(): the call
                goes on the group's side stream, ordered after the
                current one by events (DDP's buckets take this path)
  smddp-worker  the same group with every CUDA work handed to the group's
                worker thread (smddp.torch._set_cuda_inline(False))
  nccl          an NCCL group over the same ranks.  NCCL refuses two ranks
                on one GPU of one host, so each rank sets NCCL_HOSTID to a
                value of its own before NCCL starts: NCCL takes them for
                two hosts (its socket transport on loopback); libsmddp
                still sees one node.
On CPU tensors (DEVICE=cpu) the paths are smddp (every host call on the
worker) and gloo, and the GPU columns are left out.

Times per size and path, each the median over the blocks, in
microseconds per call: "issue" = the host's time per call while ITERS
calls are issued back to back (the backend's own cost when the GPU keeps
up); "loop" = the same ITERS calls then one torch.cuda.synchronize();
"sync" = each call followed by torch.cuda.synchronize() (a call's whole
round trip).  ratio = nccl's (gloo's) / smddp's loop time (above 1: smddp
faster).  Rank 0 prints, then each rank says which thread ran its smddp
calls (smddp.torch._cuda_path_stats).

PROFILE=1: instead, where the host time of one call goes: PROFILE_ITERS
(default 300) calls of SIZES' first size on each path under
torch.profiler (CPU, and the CUDA runtime calls where CUDA is), and rank 0
prints each path's table of operators and CUDA API calls per call, their
self time in microseconds (the c10d op, cudaEventRecord,
cudaStreamWaitEvent, cudaEventQuery, the launches...).  Under a minute.

Environment: DEVICE, REPEATS (default 9), ITERS (default 200), SIZES
(bytes, comma-separated; default 8,1024,65536,262144,1048576), NO_NCCL=1
(skip it), PATHS (a comma-separated subset of the paths), PROFILE.
Exit 1 when, on CUDA, the smddp path did not run its calls on the
caller's thread.
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import smddp.torch

DEVICE = os.environ.get("DEVICE", "cuda")
CUDA = DEVICE == "cuda"
REPEATS = int(os.environ.get("REPEATS", "9"))
ITERS = int(os.environ.get("ITERS", "200"))
SIZES = [int(s) for s in os.environ.get("SIZES", "8,1024,65536,262144,1048576").split(",")]
PROFILE = os.environ.get("PROFILE") == "1"
PROFILE_ITERS = int(os.environ.get("PROFILE_ITERS", "300"))

dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
if CUDA:
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", R)) % torch.cuda.device_count())
    dev = torch.device("cuda", torch.cuda.current_device())
    paths = {"smddp": None, "smddp-async": None, "smddp-worker": None}
    if os.environ.get("NO_NCCL") != "1":
        # Before NCCL's first call, which reads it.
        os.environ["NCCL_HOSTID"] = f"smddp-latency-rank{R}"
        paths["nccl"] = dist.new_group(backend="nccl")
    other = "nccl"
else:
    dev = torch.device("cpu")
    paths = {"smddp": None, "gloo": dist.new_group(backend="gloo")}
    other = "gloo"
if os.environ.get("PATHS"):
    paths = {p: g for p, g in paths.items() if p in os.environ["PATHS"].split(",")}
host = dist.new_group(backend="gloo")  # lines the ranks up between blocks


def say(*a):
    if R == 0:
        print(*a, flush=True)


def sync():
    if CUDA:
        torch.cuda.synchronize()


def call(name, x):
    g = paths[name]
    if name == "smddp-async":
        dist.all_reduce(x, group=g, async_op=True).wait()
    else:
        dist.all_reduce(x, group=g)


def select(name):
    if CUDA:
        smddp.torch._set_cuda_inline(name != "smddp-worker")


def run(name, x, sync_each):
    """(issue, total) in us per call."""
    select(name)
    for _ in range(5):  # warm
        call(name, x)
    sync()
    dist.barrier(group=host)
    iters = ITERS if not sync_each else max(20, ITERS // 4)
    t0 = time.perf_counter()
    for _ in range(iters):
        call(name, x)
        if sync_each:
            sync()
    t1 = time.perf_counter()
    sync()
    t2 = time.perf_counter()
    return (t1 - t0) / iters * 1e6, (t2 - t0) / iters * 1e6


def profiled(prof_ctx, acts, name, x):
    """PROFILE_ITERS calls under the profiler: the profile, and us per call."""
    with prof_ctx(activities=acts) as p:
        t0 = time.perf_counter()
        for _ in range(PROFILE_ITERS):
            call(name, x)
        sync()
        t = (time.perf_counter() - t0) / PROFILE_ITERS * 1e6
    return p, t


def profile():
    from torch.profiler import ProfilerActivity, profile as prof_ctx

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])
    x = torch.ones(max(1, SIZES[0] // 4), device=dev)
    say(f"# where the host time of one all_reduce of {SIZES[0]} B goes, {N} ranks, "
        f"{torch.cuda.get_device_name() if CUDA else 'CPU'}, torch {torch.__version__}: "
        f"{PROFILE_ITERS} calls per path under torch.profiler; us per call, self time")
    for name in paths:
        select(name)
        for _ in range(20):
            call(name, x)
        sync()
        dist.barrier(group=host)
        try:
            p, t = profiled(prof_ctx, acts, name, x)
        except RuntimeError as e:  # CUPTI refused (a profiler already running...)
            say(f"# {name}: torch.profiler with CUDA failed ({e}); CPU only")
            acts = [ProfilerActivity.CPU]
            p, t = profiled(prof_ctx, acts, name, x)
        dist.barrier(group=host)
        if R != 0:
            continue
        rows = sorted(p.key_averages(), key=lambda e: -e.self_cpu_time_total)
        print(f"\n## {name}: {t:.1f} us per call under the profiler", flush=True)
        print(f"{'calls/call':>10} {'self us/call':>12}  name", flush=True)
        for e in rows[:22]:
            per = e.self_cpu_time_total / PROFILE_ITERS
            if per < 0.05:
                continue
            print(f"{e.count / PROFILE_ITERS:>10.2f} {per:>12.2f}  {e.key[:70]}", flush=True)


if PROFILE:
    profile()
else:
    version = "-"
    if "nccl" in paths:
        version = torch.cuda.nccl.version()
        if isinstance(version, tuple):
            version = ".".join(map(str, version))
    say(f"# torch.distributed.all_reduce float32 sum on {DEVICE}, {N} ranks, "
        f"{torch.cuda.get_device_name() if CUDA else 'CPU'}, torch {torch.__version__}, "
        f"NCCL {version}, CUDA_MPS_PIPE_DIRECTORY={os.environ.get('CUDA_MPS_PIPE_DIRECTORY', '-')}; "
        f"median of {REPEATS} blocks; us per call")
    cols = ("issue", "loop", "sync") if CUDA else ("issue",)
    head = f"{'bytes':>9}"
    for name in paths:
        head += "".join(f" {name + '_' + c:>18}" for c in cols)
    have_ratio = other in paths and "smddp" in paths
    say(head + (f" {other + '/smddp':>11}" if have_ratio else ""))
    for size in SIZES:
        x = torch.ones(max(1, size // 4), device=dev)
        times = {(p, s): [] for p in paths for s in (False, True)}
        for _ in range(REPEATS):
            for p in paths:
                for s in ((False, True) if CUDA else (False,)):
                    times[(p, s)].append(run(p, x, s))
        med = {}
        for p in paths:
            med[(p, "issue")] = statistics.median(t[0] for t in times[(p, False)])
            if CUDA:
                med[(p, "loop")] = statistics.median(t[1] for t in times[(p, False)])
                med[(p, "sync")] = statistics.median(t[1] for t in times[(p, True)])
        line = f"{size:>9}"
        for p in paths:
            line += "".join(f" {med[(p, c)]:>18.1f}" for c in cols)
        if have_ratio:
            key = "loop" if CUDA else "issue"
            line += f" {med[(other, key)] / med[('smddp', key)]:>10.2f}x"
        say(line)
ok = True
if CUDA:
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
