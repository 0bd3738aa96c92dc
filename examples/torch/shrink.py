"""examples/torch/shrink.py - DDP training that goes on when a rank dies.

    smddp-run -n 4 --on-failure continue python shrink.py --kill 2 --at 5
    smddp-run -n 4 --on-failure continue python shrink.py --kill 0 --device cuda

Each rank trains the same small model on data of its own; DDP averages the
gradients through the "smddp" backend. To show a failure, rank --kill dies
(SIGKILL, as a crash or a lost machine would) at step --at. The survivors'
backward pass raises DistBackendError naming it; they shrink the default
group around it (dist.shrink_group, torch 2.15), wrap the model in DDP again
on the new group and run the failed step again. smddp-run --on-failure
continue leaves them running, and serves torch's store so that any rank
may die, rank 0 included (docs/fault-tolerance.md).

With --device cuda the model, data and gradients live on the GPU LOCAL_RANK
(modulo the GPUs there), bound to the group (init_process_group's device_id:
torch registers a shrunk group's backend for the bound device only). The
gradients' all-reduce then runs on the GPU after backward() returns, so a
death may show only once it ran: a barrier after backward waits for it (and
checks it), so that no survivor steps with gradients a dead rank left
half-reduced.
"""
import argparse
import os
import re
import signal

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import smddp.torch  # noqa: F401  registers "smddp"

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=10)
p.add_argument("--kill", type=int, default=-1, help="the rank that dies (default: none)")
p.add_argument("--at", type=int, default=5, help="the step at which it dies")
p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
               help="where the model and the gradients live (default: cpu)")
args = p.parse_args()

if args.device == "cuda" and not torch.cuda.is_available():
    p.error("--device cuda: torch sees no CUDA GPU here")
if args.device == "cuda":
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group(backend="smddp", device_id=dev)
else:
    dev = torch.device("cpu")
    dist.init_process_group(backend="smddp")
me = dist.get_rank()      # this rank's first rank: its data, its name in messages


def batch(step):
    g = torch.Generator().manual_seed(1000 * me + step)
    x = torch.randn(32, 16, generator=g)
    return x.to(dev), torch.tanh(x.sum(1, keepdim=True)).to(dev)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(dev)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step = 0
while step < args.steps:
    if step == args.at and me == args.kill:
        os.kill(os.getpid(), signal.SIGKILL)
    x, y = batch(step)
    opt.zero_grad()
    try:
        nn.functional.mse_loss(ddp(x), y).backward()
        if dev.type == "cuda":
            dist.barrier()               # the GPU's all-reduce ran, and did not fail
    except dist.DistBackendError as e:
        # "... rank 2 (pid 4242) is gone ...": the rank of the current group;
        # a rank that passed the failure on ("rank 0 (pid 4240) gave up
        # after: ...") is not one of the dead
        dead = sorted({int(r) for r in re.findall(r"rank (\d+) \(pid [^)]*\)(?! gave up after)",
                                                  str(e))})
        print(f"rank {me}: step {step} failed; ranks {dead} are gone: shrinking", flush=True)
        ddp = None                       # the old wrapper's hooks go with it
        dist.shrink_group(dead)          # the new group is the default one
        ddp = DDP(model)                 # the same module, on the survivors
        print(f"rank {me}: now rank {dist.get_rank()} of {dist.get_world_size()}", flush=True)
        continue                         # the failed step again
    opt.step()
    step += 1

flat = torch.cat([q.detach().double().reshape(-1) for q in model.parameters()])
print(f"rank {me}: {step} steps on {dev.type}, {dist.get_world_size()} ranks at the end, "
      f"parameter checksum {flat.sum().item():.12e}", flush=True)
dist.destroy_process_group()
