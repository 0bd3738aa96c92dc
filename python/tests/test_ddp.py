"""test_ddp.py - DDP and FSDP trained on smddp give the parameters gloo gives.

Run one process per rank (env://).  DEVICE=cuda trains on CUDA tensors (GPU
local rank modulo the GPUs, ranks may share one); FSDP is then left out.  Each variant trains the same model from
the same seed on the same per-rank batches twice, once over the smddp world
and once over a gloo group, and compares every parameter: bit for bit on 2
ranks (the sums of two are the same in any order), to float rounding on more.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from common import check, finish, same

dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
STEPS = 25
DEVICE = os.environ.get("DEVICE", "cpu")
if DEVICE == "cuda":
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", R)) % torch.cuda.device_count())
    dev = torch.device("cuda", torch.cuda.current_device())
else:
    dev = torch.device("cpu")
torch.set_num_threads(1)


class Net(nn.Module):
    def __init__(self, unused=False):
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.b = nn.Linear(64, 16)
        self.unused = nn.Linear(16, 16) if unused else None

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def batches():
    g = torch.Generator().manual_seed(100 + R)
    return [(torch.randn(8, 32, generator=g).to(dev), torch.randn(8, 16, generator=g).to(dev))
            for _ in range(STEPS)]


def train(group, wrap, hook=None, accumulate=False, unused=False, **kw):
    torch.manual_seed(0)
    model = Net(unused).to(dev)
    m = wrap(model, group, **kw)
    if hook is not None:
        m.register_comm_hook(group, hook)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    for i, (x, y) in enumerate(batches()):
        if accumulate and i % 2 == 0:
            with m.no_sync():
                nn.functional.mse_loss(m(x), y).backward()
            continue
        nn.functional.mse_loss(m(x), y).backward()
        opt.step()
        opt.zero_grad()
    if hasattr(m, "summon_full_params"):  # FSDP: the parameters are sharded
        with m.summon_full_params(m):
            return [p.detach().clone() for p in m.parameters()]
    return [p.detach().clone() for p in model.parameters()]


def ddp(model, group, **kw):
    if DEVICE == "cuda":
        kw["device_ids"] = [dev.index]
    return DDP(model, process_group=group, **kw)


def compare(name, a, b, tol=1e-5):
    """tol: beyond 2 ranks the sums of three or more round in another order
    (16-bit hooks: to 16-bit precision)."""
    a, b = [x.cpu() for x in a], [y.cpu() for y in b]
    if N <= 2:
        ok = all(torch.equal(x, y) for x, y in zip(a, b))
    else:
        ok = all(torch.allclose(x, y, rtol=tol, atol=tol) for x, y in zip(a, b))
    worst = max((x - y).abs().max().item() for x, y in zip(a, b))
    check(ok, f"{name}: smddp and gloo parameters differ (max {worst:g})")
    # and training did something, the same on every rank
    mine = torch.cat([p.flatten() for p in a])
    everyone = [torch.empty_like(mine) for _ in range(N)]
    dist.all_gather(everyone, mine, group=gloo)
    check(all(torch.equal(e, mine) for e in everyone), f"{name}: ranks disagree")
    print(f"rank {R}: {name}: max difference {worst:g}", flush=True)


from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402

variants = {
    "plain": {},
    "gradient_as_bucket_view": {"gradient_as_bucket_view": True},
    "find_unused_parameters": {"find_unused_parameters": True, "unused": True},
    "static_graph": {"static_graph": True},
    "no_sync": {"accumulate": True},
    "fp16_compress_hook": {"hook": default_hooks.fp16_compress_hook},
    "bf16_compress_hook": {"hook": default_hooks.bf16_compress_hook},
    "small buckets": {"bucket_cap_mb": 0.01},
}
for name, kw in variants.items():
    compare(name, train(None, ddp, **kw), train(gloo, ddp, **kw), 1e-3 if "16" in name else 1e-5)

# A buffer of a dtype libsmddp cannot reduce (int16): DDP broadcasts the
# buffers from rank 0 when it wraps the model and before each forward.
# The reference is gloo moving the same buffer's bytes.
def with_int16_buffer():
    torch.manual_seed(0)
    model = Net().to(dev)
    model.register_buffer("steps", (torch.arange(6, dtype=torch.int16) * 1000 * (R + 1)).to(dev))
    return model


want = with_int16_buffer().steps.cpu()
dist.broadcast(want.view(torch.uint8), 0, group=gloo)
m = ddp(with_int16_buffer(), None)
check(same(m.module.steps.cpu(), want), "DDP wrapping a model with an int16 buffer")
m(torch.randn(2, 32).to(dev)).sum().backward()
check(same(m.module.steps.cpu(), want), "the int16 buffer after a DDP step")

if DEVICE == "cuda":
    finish(f"on {torch.cuda.get_device_name()}")
# FSDP (all_gather_into_tensor and reduce_scatter_tensor), on CPU
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP  # noqa: E402


def fsdp(model, group, **kw):
    return FSDP(model, process_group=group, device_id=torch.device("cpu"), use_orig_params=True)


compare("FSDP", train(None, fsdp), train(gloo, fsdp))

# fully_shard (FSDP2) where this torch has it: its mesh is the default (smddp)
# group; the reference is DDP over gloo, which computes the same mean gradient.
try:
    from torch.distributed.fsdp import fully_shard
except ImportError:
    fully_shard = None
if fully_shard is not None:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (N,))

    def fs2(model, group, **kw):
        for layer in (model.a, model.b):
            fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)

    torch.manual_seed(0)
    model = Net()
    fully = fs2(model, None)
    opt = torch.optim.SGD(fully.parameters(), lr=0.05)
    for x, y in batches():
        nn.functional.mse_loss(fully(x), y).backward()
        opt.step()
        opt.zero_grad()
    got = [p.full_tensor().detach().clone() for p in fully.parameters()]
    want = train(gloo, ddp)
    ok = all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, want))
    check(ok, "fully_shard: parameters differ from DDP over gloo")
    print(f"rank {R}: fully_shard: max difference "
          f"{max((a - b).abs().max().item() for a, b in zip(got, want)):g}", flush=True)
else:
    print(f"rank {R}: fully_shard: not in torch {torch.__version__}", file=sys.stderr)
finish()
