"""examples/torch/pipeline.py - pipeline parallelism (torch.distributed.pipelining) over libsmddp.

    smddp-run -n 2 python pipeline.py                             # 2 stages, on the GPU where there is one
    torchrun --nproc-per-node 4 pipeline.py --schedule gpipe      # 4 stages, started by torchrun
    smddp-run -n 2 python pipeline.py --cpu                       # CPU tensors, even where there are GPUs
    smddp-run -n 2 python pipeline.py --cpu --backend gloo        # the same job on gloo, to compare

Rank r holds stage r: a contiguous slice of the model's blocks (the first
stage also the input layer, the last the head and the loss). Each step
cuts the batch into micro-batches; the schedule (1F1B by default, or
GPipe) sends activations forward and their gradients backward between
neighbouring stages with batch_isend_irecv, through the "smddp" backend's
point to point, on the GPU where there is one (ranks may share a GPU:
LOCAL_RANK modulo the GPUs; gloo moves CPU tensors only) and on CPU tensors
otherwise. Each rank then steps its own optimizer. At the end every rank
prints its stage's parameter checksum (the same as gloo's on the CPU) and,
with --save PREFIX, saves the stage to PREFIX.RANK.pt. Every rank builds
the whole model from one seed and keeps its slice, which is simple for a
small model; a large one is built on the "meta" device and only the slice
materialized. Needs torch 2.5 or later (stage shapes inferred at run time).
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

import smddp.torch  # noqa: F401  registers "smddp" (SageMaker's name: smdistributed.dataparallel.torch.torch_smddp)

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=8)
p.add_argument("--batch-size", type=int, default=32, help="per step, cut into --microbatches")
p.add_argument("--microbatches", type=int, default=4)
p.add_argument("--schedule", choices=["1f1b", "gpipe"], default="1f1b")
p.add_argument("--backend", default="smddp")
p.add_argument("--cpu", action="store_true", help="train on the CPU even where there are GPUs")
p.add_argument("--save", metavar="PREFIX", help="each rank saves its stage to PREFIX.RANK.pt")
args = p.parse_args()

# env://: smddp-run (or torchrun) sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
dist.init_process_group(backend=args.backend)
rank, world = dist.get_rank(), dist.get_world_size()
if torch.cuda.is_available() and not args.cpu:
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    torch.cuda.set_device(device)
else:
    device = torch.device("cpu")

WIDTH, BLOCKS = 64, 8


def block():
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh())


torch.manual_seed(0)  # the same whole model on every rank, then each keeps its slice
blocks = [block() for _ in range(BLOCKS)]
inp, head = nn.Linear(16, WIDTH), nn.Linear(WIDTH, 1)
lo, hi = rank * BLOCKS // world, (rank + 1) * BLOCKS // world
layers = blocks[lo:hi]
if rank == 0:
    layers.insert(0, inp)
if rank == world - 1:
    layers.append(head)
stage_module = nn.Sequential(*layers).to(device)

stage = PipelineStage(stage_module, rank, world, device)  # group: the default one
Schedule = Schedule1F1B if args.schedule == "1f1b" else ScheduleGPipe
schedule = Schedule(stage, args.microbatches, loss_fn=nn.functional.mse_loss)
opt = torch.optim.SGD(stage_module.parameters(), lr=0.05, momentum=0.9)

g = torch.Generator().manual_seed(1)
for step in range(args.steps):
    x = torch.randn(args.batch_size, 16, generator=g)  # the same batches on every rank:
    y = torch.tanh(x.sum(1, keepdim=True) / 4)         # the first stage takes x, the last y
    if rank == 0:
        schedule.step(x.to(device))
    elif rank == world - 1:
        losses = []
        schedule.step(target=y.to(device), losses=losses)
        if step % 4 == 3:
            print(f"step {step}: loss {torch.stack(losses).mean().item():.4f}", flush=True)
    else:
        schedule.step()
    opt.step()
    opt.zero_grad()

params = {k: v.detach().cpu() for k, v in stage_module.state_dict().items()}
if args.save:
    torch.save(params, f"{args.save}.{rank}.pt")
total = sum(v.double().sum().item() for v in params.values())
print(f"rank {rank} of {world}: stage {rank} parameter checksum {total:.12e}", flush=True)
dist.destroy_process_group()
