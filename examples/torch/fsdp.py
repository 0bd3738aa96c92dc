"""examples/torch/fsdp.py - fully sharded data parallel (FSDP2's fully_shard) over libsmddp.

    smddp-run python fsdp.py                              # one rank per GPU (CPU without one)
    torchrun --nproc-per-node 4 fsdp.py                   # the same, started by torchrun
    smddp-run -n 2 python fsdp.py --cpu                   # CPU tensors, even where there are GPUs
    smddp-run -n 2 python fsdp.py --cpu --backend gloo    # the same job on gloo, to compare

Each rank keeps a 1/N shard of every parameter, gradient and optimizer
state. fully_shard gathers a block's parameters before its forward and its
backward (all_gather_into_tensor) and reduce-scatters its gradients after
(reduce_scatter_tensor), through the "smddp" backend of the default group,
on the GPU where there is one (ranks may share a GPU: LOCAL_RANK modulo the
GPUs) and on CPU tensors otherwise. Every rank trains on its own shard of a
synthetic data set; at the end the ranks gather the full parameters and
print their checksum (the same on every rank, and the same as gloo's on the
CPU), and rank 0 saves them with --save FILE. Needs torch 2.6 or later
(torch.distributed.fsdp.fully_shard); FullyShardedDataParallel, the older
wrapper, runs on "smddp" too (docs/torch.md).
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import smddp.torch  # noqa: F401  registers "smddp" (SageMaker's name: smdistributed.dataparallel.torch.torch_smddp)

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=8)
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--backend", default="smddp")
p.add_argument("--cpu", action="store_true", help="train on the CPU even where there are GPUs")
p.add_argument("--save", metavar="FILE", help="rank 0 saves the trained parameters (torch.save)")
args = p.parse_args()

# env://: smddp-run (or torchrun) sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
dist.init_process_group(backend=args.backend)
rank, world = dist.get_rank(), dist.get_world_size()
if torch.cuda.is_available() and not args.cpu:
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    torch.cuda.set_device(device)
else:
    device = torch.device("cpu")
mesh = init_device_mesh(device.type, (world,))  # one dimension: every rank of the default group


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, width=64, depth=4):
        super().__init__()
        self.inp = nn.Linear(32, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


torch.manual_seed(0)  # the same initial parameters on every rank
model = Net().to(device)
for block in model.blocks:  # one all-gather and one reduce-scatter per block
    fully_shard(block, mesh=mesh)
fully_shard(model, mesh=mesh)  # the rest (inp, out) as one more unit
# Any optimizer works on the shards (AdamW as well); SGD keeps the GPU run
# within 1e-4 of gloo's on the CPU (tests/gpu/torch-examples-device.sh),
# where Adam would turn the last bit of a near-zero gradient into lr.
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

g = torch.Generator().manual_seed(1)
x = torch.randn(world * args.steps * args.batch_size, 32, generator=g)
y = torch.tanh(x.sum(1, keepdim=True) / 8)
mine = torch.arange(rank, len(x), world)  # this rank's share of the data
for step in range(args.steps):
    i = mine[step * args.batch_size:(step + 1) * args.batch_size]
    loss = nn.functional.mse_loss(model(x[i].to(device)), y[i].to(device))
    loss.backward()
    opt.step()
    opt.zero_grad()
    if rank == 0 and step % 4 == 3:
        print(f"step {step}: loss {loss.item():.4f}", flush=True)

# The parameters are DTensors sharded over the mesh: full_tensor() gathers them.
full = {k: v.full_tensor().detach().cpu() for k, v in model.state_dict().items()}
if rank == 0 and args.save:
    torch.save(full, args.save)
total = sum(v.double().sum().item() for v in full.values())
print(f"rank {rank} of {world}: parameter checksum {total:.12e}", flush=True)
dist.destroy_process_group()
