"""torch_nccl_bench.py - smddp against NCCL (and gloo) on CUDA tensors, side by side in one run.

Run one process per rank (env://), ranks sharing one GPU under MPS or one GPU each:
  smddp-run -n 2 python torch_nccl_bench.py [coll|ddp|all]
  coll  all_reduce, all_gather_into_tensor and reduce_scatter_tensor of float32
        tensors, 8 B to 256 MiB (the size is the larger buffer, as nccl-tests
        counts it); time per call end to end (launch to the stream's end)
  ddp   one DDP step (forward, backward with the gradient all-reduce overlapped,
        optimizer) of an MLP of about 100 M parameters (DDP_WIDTH=5760), batch 8,
        on smddp, NCCL and gloo
NCCL gets NCCL_HOSTID=bench-h<RANK> on every rank, so ranks on one GPU are two
"hosts" to it and it moves data over its socket transport (NCCL_SOCKET_IFNAME=lo
unless set). With FAKE_HOSTS=1 smddp gets SMDDP_HOSTID likewise (libsmddp's
sockets by default, or SMDDP_NET_TRANSPORT=fabric for libfabric's tcp); with
FAKE_HOSTS=0 smddp stays on one node
(CUDA IPC), the comparison for the small-call latency.
The backends take turns, block by block, REPEATS times (default 5); each row is
the median over the blocks; ratio = NCCL's time / smddp's (above 1: smddp is
faster).  A wrong result of either backend is counted in the last column.
Rank 0 prints.  Other knobs: SIZES (comma list of bytes), COLLS (comma list
among allreduce,allgather,reducescatter), DDP_STEPS (default 5).
"""
import os
import statistics
import sys
import time

RANK = int(os.environ["RANK"])
os.environ["NCCL_HOSTID"] = f"bench-h{RANK}"
os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
FAKE = os.environ.get("FAKE_HOSTS", "1") == "1"
if FAKE:
    os.environ["SMDDP_HOSTID"] = f"bench-h{RANK}"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import smddp.torch  # noqa: F401,E402
from benchlib import mlp  # noqa: E402

REPEATS = int(os.environ.get("REPEATS", "5"))
torch.set_num_threads(1)
dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(R % torch.cuda.device_count())
dev = torch.device("cuda", torch.cuda.current_device())
gloo = dist.new_group(backend="gloo")
nccl = dist.new_group(backend="nccl", device_id=dev)
groups = {"smddp": None, "nccl": nccl}
SIZES = [int(s) for s in os.environ.get("SIZES", "").split(",") if s] or \
    [8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20, 64 << 20, 256 << 20]
COLLS = [c for c in os.environ.get("COLLS", "allreduce,allgather,reducescatter").split(",") if c]


def say(*a):
    if R == 0:
        print(*a, flush=True)


def sync_all():
    torch.cuda.synchronize()
    dist.barrier(group=gloo)


def make(coll, size):
    """The call for one collective of `size` bytes, and a check of its result."""
    n = max(N, size // 4 // N * N)
    if coll == "allreduce":
        x = torch.empty(n, device=dev)

        def fill():
            x.fill_(R + 1)

        def check():
            return bool((x == N * (N + 1) / 2).all())
        return (lambda g: dist.all_reduce(x, group=g)), fill, check
    if coll == "allgather":
        x, y = torch.empty(n // N, device=dev), torch.empty(n, device=dev)
        want = torch.arange(1, N + 1, device=dev, dtype=torch.float32).repeat_interleave(n // N)

        def fill():
            x.fill_(R + 1)
            y.zero_()

        def check():
            return bool((y == want).all())
        return (lambda g: dist.all_gather_into_tensor(y, x, group=g)), fill, check
    x, y = torch.empty(n, device=dev), torch.empty(n // N, device=dev)

    def fill():
        x.fill_(R + 1)
        y.zero_()

    def check():
        return bool((y == N * (N + 1) / 2).all())
    return (lambda g: dist.reduce_scatter_tensor(y, x, group=g)), fill, check


def bench_coll():
    say(f"# {N} ranks, torch {torch.__version__}, {torch.cuda.get_device_name()}, "
        f"smddp {'between fake hosts' if FAKE else 'on one node'}, NCCL between fake hosts "
        f"(socket on {os.environ['NCCL_SOCKET_IFNAME']}); median of {REPEATS} blocks; "
        f"ratio = nccl / smddp")
    say(f"{'coll':>13} {'bytes':>10} {'smddp_us':>10} {'nccl_us':>10} {'ratio':>6} "
        f"{'smddp_busbw':>11} {'wrong':>5}")
    for coll in COLLS:
        for size in SIZES:
            call, fill, check = make(coll, size)
            iters = max(2, min(50, (64 << 20) // max(size, 1)))
            times = {k: [] for k in groups}
            wrong = 0
            for _ in range(REPEATS):
                for name, g in groups.items():
                    fill()
                    call(g)
                    torch.cuda.synchronize()
                    wrong += not check()
                    call(g)
                    sync_all()
                    t0 = time.perf_counter()
                    for _ in range(iters):
                        call(g)
                    torch.cuda.synchronize()
                    times[name].append((time.perf_counter() - t0) / iters * 1e6)
            s, c = statistics.median(times["smddp"]), statistics.median(times["nccl"])
            factor = 2 * (N - 1) / N if coll == "allreduce" else (N - 1) / N
            busbw = factor * size / (s / 1e6) / 1e9
            w = torch.tensor([wrong])
            dist.all_reduce(w, group=gloo)
            say(f"{coll:>13} {size:>10} {s:>10.1f} {c:>10.1f} {c / s:>5.2f}x {busbw:>11.2f} "
                f"{int(w):>5}")


def bench_ddp():
    width = int(os.environ.get("DDP_WIDTH", "5760"))
    steps = int(os.environ.get("DDP_STEPS", "5"))

    def model():
        return mlp(width, dev)

    nparam = sum(p.numel() for p in model().parameters())
    torch.manual_seed(1 + R)
    x = torch.randn(8, width, device=dev)
    y = torch.randn(8, width, device=dev)
    nets = {}
    for name, g in {"smddp": None, "nccl": nccl, "gloo": gloo}.items():
        m = DDP(model(), process_group=g)
        nets[name] = (m, torch.optim.SGD(m.parameters(), lr=1e-4))
    plain = model()
    nets["compute"] = (plain, torch.optim.SGD(plain.parameters(), lr=1e-4))
    times = {k: [] for k in nets}
    for _ in range(REPEATS):
        for name, (m, opt) in nets.items():
            for i in range(steps + 1):
                if i == 1:
                    sync_all()
                    t0 = time.perf_counter()
                opt.zero_grad()
                nn.functional.mse_loss(m(x), y).backward()
                opt.step()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t0) / steps * 1e3)
    # the three DDP models took the same steps from the same start: equal parameters
    ref = [p.detach() for p in nets["gloo"][0].parameters()]
    diff = {k: max(float((a - b).abs().max()) for a, b in zip((q.detach() for q in nets[k][0].parameters()), ref))
            for k in ("smddp", "nccl")}
    med = {k: statistics.median(v) for k, v in times.items()}
    say(f"# DDP step, MLP of {nparam / 1e6:.1f} M parameters, batch 8, {N} ranks, "
        f"{torch.cuda.get_device_name()}, median of {REPEATS} blocks of {steps} steps; "
        f"smddp {'between fake hosts' if FAKE else 'on one node'}, NCCL between fake hosts")
    say(f"{'smddp_ms':>9} {'nccl_ms':>9} {'gloo_ms':>9} {'nccl/smddp':>10} {'gloo/smddp':>10} "
        f"{'compute_ms':>10}  max|smddp-gloo| max|nccl-gloo|")
    say(f"{med['smddp']:>9.1f} {med['nccl']:>9.1f} {med['gloo']:>9.1f} "
        f"{med['nccl'] / med['smddp']:>9.2f}x {med['gloo'] / med['smddp']:>9.2f}x "
        f"{med['compute']:>10.1f}  {diff['smddp']:.3g} {diff['nccl']:.3g}")


what = sys.argv[1] if len(sys.argv) > 1 else "all"
if what in ("coll", "all"):
    bench_coll()
if what in ("ddp", "all"):
    bench_ddp()
sync_all()
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)
