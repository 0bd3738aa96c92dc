"""examples/torch/ddp.py - data-parallel training with torch's DDP over libsmddp.

    smddp-run python ddp.py                       # one rank per GPU (CPU without one)
    smddp-run -n 2 python ddp.py --backend gloo   # the same job on gloo, to compare

Each rank trains the same small model on its shard of a synthetic data set;
DDP averages the gradients through the "smddp" backend, overlapped with
the backward pass. At the end every rank prints a checksum of its
parameters: the replicas agree.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import smddp.torch  # noqa: F401  registers "smddp" (SageMaker's name: smdistributed.dataparallel.torch.torch_smddp)

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--backend", default="smddp")
p.add_argument("--cpu", action="store_true", help="train on the CPU even where there are GPUs")
args = p.parse_args()

# env://: smddp-run (or torchrun) sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
dist.init_process_group(backend=args.backend)
rank, world = dist.get_rank(), dist.get_world_size()
if torch.cuda.is_available() and not args.cpu:
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    torch.cuda.set_device(device)
else:
    device = torch.device("cpu")

g = torch.Generator().manual_seed(1)
x = torch.randn(1024, 32, generator=g)
y = torch.tanh(x @ torch.randn(32, 1, generator=g))
data = torch.utils.data.TensorDataset(x, y)
sampler = torch.utils.data.distributed.DistributedSampler(data, world, rank, seed=0)
loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, sampler=sampler)

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        loss = nn.functional.mse_loss(model(xb.to(device)), yb.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)

flat = torch.cat([q.detach().double().cpu().reshape(-1) for q in model.parameters()])
print(f"rank {rank} of {world}: parameter checksum {flat.sum().item():.12e}", flush=True)
dist.destroy_process_group()
