"""examples/torch/deepspeed_zero.py - DeepSpeed ZeRO (stage 2, ds_config.json) over libsmddp.

    smddp-run python deepspeed_zero.py                          # one rank per GPU (CPU without one)
    torchrun --nproc-per-node 4 deepspeed_zero.py               # the same, started by torchrun
    smddp-run -n 2 python deepspeed_zero.py --backend gloo      # the same job on gloo, to compare
    DS_ACCELERATOR=cpu smddp-run -n 2 python deepspeed_zero.py  # CPU tensors, even where there are GPUs

deepspeed.init_distributed(dist_backend="smddp") starts torch.distributed
on libsmddp; DeepSpeed's engine then partitions the optimizer state and
the gradients over the ranks (ZeRO stage 2 in ds_config.json, beside this
file, which --config replaces): gradients reduce-scattered bucket by bucket
during the backward pass (reduce_scatter_tensor), the updated partitions
all-gathered after each step (all_gather_into_tensor), parameters
broadcast at the start. DeepSpeed places the model on its accelerator:
the GPU LOCAL_RANK (ranks may share one: LOCAL_RANK modulo the GPUs) where
torch has CUDA, else the CPU (DS_ACCELERATOR=cpu forces it). Install with
`DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed` (no compiled ops:
the optimizer is torch's AdamW, "torch_adam" in the config). Every rank trains
on its own shard of a synthetic data set; at the end every rank prints the
checksum of the full parameters (the same on every rank, and the same as
gloo's on the CPU), and rank 0 saves them with --save FILE.
"""
import argparse
import os

import torch
import torch.nn as nn

import deepspeed
import smddp.torch  # noqa: F401  registers "smddp" (SageMaker's name: smdistributed.dataparallel.torch.torch_smddp)

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=8)
p.add_argument("--backend", default="smddp")
p.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json"))
p.add_argument("--save", metavar="FILE", help="rank 0 saves the trained parameters (torch.save)")
p.add_argument("--local_rank", type=int, default=-1, help="set by DeepSpeed's own launcher (unused)")
args = p.parse_args()

# env://: smddp-run (or torchrun) sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
deepspeed.init_distributed(dist_backend=args.backend)
rank, world = deepspeed.comm.get_rank(), deepspeed.comm.get_world_size()


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


torch.manual_seed(0)  # the same initial parameters on every rank
model = nn.Sequential(nn.Linear(32, 64), *[Block(64) for _ in range(4)], nn.Linear(64, 1))
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=args.config)
batch = engine.train_micro_batch_size_per_gpu()

g = torch.Generator().manual_seed(1)
x = torch.randn(world * args.steps * batch, 32, generator=g)
y = torch.tanh(x.sum(1, keepdim=True) / 8)
mine = torch.arange(rank, len(x), world)  # this rank's share of the data
for step in range(args.steps):
    i = mine[step * batch:(step + 1) * batch]
    loss = nn.functional.mse_loss(engine(x[i].to(engine.device)), y[i].to(engine.device))
    engine.backward(loss)  # reduce-scatters the gradients into each rank's partition
    engine.step()  # updates this rank's partition, then all-gathers the parameters
    if rank == 0 and step % 4 == 3:
        print(f"step {step}: loss {loss.item():.4f}", flush=True)

# ZeRO 1 and 2 keep the full parameters on every rank (stage 3 would shard them)
full = {k: v.detach().cpu() for k, v in engine.module.state_dict().items()}
if rank == 0 and args.save:
    torch.save(full, args.save)
total = sum(v.double().sum().item() for v in full.values())
print(f"rank {rank} of {world}: parameter checksum {total:.12e}", flush=True)
deepspeed.comm.destroy_process_group()
