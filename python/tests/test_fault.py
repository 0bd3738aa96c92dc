"""test_fault.py - a rank dies in the middle of DDP training: the others raise
DistBackendError naming it within seconds, from the call or from wait().

Run under smddp-run with --grace long enough (SIGTERM is ignored here, so that
the witnesses can report after the launcher starts stopping the job).
Usage: test_fault.py VICTIM
"""
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import smddp.torch  # noqa: F401

signal.signal(signal.SIGTERM, signal.SIG_IGN)
victim = int(sys.argv[1])
dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 256), torch.randn(8, 256)
t_death = None
try:
    for step in range(100000):
        if step == 20 and R == victim:
            print(f"rank {R}: dying at step {step}", flush=True)
            import os
            os.kill(os.getpid(), signal.SIGKILL)
        if step == 20:
            t_death = time.monotonic()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        if t_death and time.monotonic() - t_death > 60:
            print(f"TORCH-BAD rank={R}: still training 60 s after rank {victim} died", flush=True)
            sys.exit(1)
except dist.DistBackendError as e:
    took = time.monotonic() - (t_death or time.monotonic())
    msg = str(e)
    ok = f"rank {victim}" in msg and took < 15
    print(f"{'TORCH-OK' if ok else 'TORCH-BAD'} rank={R} DistBackendError after {took:.2f} s: "
          f"{msg.splitlines()[0][:400]}", flush=True)
    # the group is broken for good, and says so at once
    t = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1))
        print(f"TORCH-BAD rank={R}: a call after the failure succeeded", flush=True)
    except dist.DistBackendError as e2:
        if time.monotonic() - t > 2 or f"rank {victim}" not in str(e2):
            print(f"TORCH-BAD rank={R}: the next call: {e2}", flush=True)
    sys.exit(42)
except Exception as e:
    print(f"TORCH-BAD rank={R}: {type(e).__name__}: {e}", flush=True)
    sys.exit(1)
