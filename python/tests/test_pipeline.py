"""test_pipeline.py - pipeline-parallel training over smddp's point to point trains to gloo's parameters.

Run one process per rank (env://: smddp-run -n N), 2 to 4 ranks: rank r holds
stage r of an MLP.  Two pipelines, each run once over an smddp group and once
over a gloo group from the same initial parameters and data:

- by hand: GPipe with dist.send/dist.recv of activations forward and of their
  gradients backward, several micro-batches;
- torch.distributed.pipelining (PipelineStage and ScheduleGPipe, which move
  tensors with batch_isend_irecv) where the installed torch has it.

After a few SGD steps each stage's parameters must be the same bit for bit:
the backends only move data, so any difference is a message lost, reordered
or corrupted.

On CUDA tensors (DEVICE=cuda) gloo, which moves host memory only, still
carries the reference, but the reference must compute on the GPU as the
smddp run does: the GPU's matrix products round differently from the CPU's,
so a reference trained on the CPU differs in the last bits everywhere.  The
hand-written pipeline's reference therefore trains on the GPU and sends
through host copies (bit for bit).  torch.distributed.pipelining moves the
stage's own device tensors, which gloo cannot take, so its reference trains
on the CPU and the parameters are compared to a relative 1e-4: a lost or
misrouted micro-batch moves them by far more (the check below makes sure).
"""
import inspect
import os

import torch
import torch.distributed as dist
import torch.nn as nn

from common import check, finish, same

dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
assert N >= 2, "a pipeline needs two ranks at least"

DEVICE = os.environ.get("DEVICE", "cpu")
if DEVICE == "cuda":
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", R)) % torch.cuda.device_count())
WIDTH, BATCH, MICRO, STEPS = 64, 16, 4, 3
torch.set_num_threads(1)


def stage_module():
    torch.manual_seed(100 + R)
    layers = [nn.Linear(WIDTH, WIDTH), nn.Tanh()]
    if R == N - 1:
        layers.append(nn.Linear(WIDTH, 1))
    return nn.Sequential(*layers)


def batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, 1, generator=g)


def send(t, dst, group, tag):
    """gloo takes host memory: a GPU tensor goes through a host copy."""
    if group is gloo and t.is_cuda:
        t = t.cpu()
    dist.send(t, dst, group=group, tag=tag)


def recv(t, src, group, tag):
    if group is gloo and t.is_cuda:
        host = torch.empty_like(t, device="cpu")
        dist.recv(host, src, group=group, tag=tag)
        t.copy_(host)
    else:
        dist.recv(t, src, group=group, tag=tag)


def by_hand(group, device, corrupt=False):
    model = stage_module().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        x_all, y_all = batch(step)
        xs, ys = x_all.chunk(MICRO), y_all.chunk(MICRO)
        saved = []
        for m in range(MICRO):  # forward, every micro-batch
            if R == 0:
                x = xs[m].to(device)
            else:
                x = torch.empty(BATCH // MICRO, WIDTH, device=device)
                recv(x, R - 1, group, m)
                if corrupt and m == 0:  # a corrupted message: its rows out of order
                    x = x.roll(1, dims=0)
                x.requires_grad_()
            out = model(x)
            if R < N - 1:
                send(out.detach(), R + 1, group, m)
            saved.append((x, out))
        for m in reversed(range(MICRO)):  # backward, last micro-batch first
            x, out = saved[m]
            if R == N - 1:
                loss = nn.functional.mse_loss(out, ys[m].to(device)) / MICRO
                loss.backward()
            else:
                grad = torch.empty_like(out)
                recv(grad, R + 1, group, 1000 + m)
                out.backward(grad)
            if R > 0:
                send(x.grad, R - 1, group, 1000 + m)
        opt.step()
        opt.zero_grad()
    return [p.detach().cpu().clone() for p in model.parameters()]


def with_pipelining(group, device):
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    model = stage_module().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    kwargs = {}
    if inspect.signature(PipelineStage).parameters["input_args"].default is inspect.Parameter.empty:
        # torch before shape inference (2.4) wants the micro-batch's shape
        kwargs["input_args"] = torch.empty(BATCH // MICRO, WIDTH, device=device)
    stage = PipelineStage(model, R, N, device, group=group, **kwargs)
    schedule = ScheduleGPipe(stage, MICRO, loss_fn=nn.functional.mse_loss)
    for step in range(STEPS):
        x_all, y_all = batch(step)
        if R == 0:
            schedule.step(x_all.to(device))
        elif R == N - 1:
            schedule.step(target=y_all.to(device), losses=[])
        else:
            schedule.step()
        opt.step()
        opt.zero_grad()
    return [p.detach().cpu().clone() for p in model.parameters()]


def close(got, want):
    return len(got) == len(want) and all(
        a.shape == b.shape and torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(got, want))


dev = torch.device(DEVICE)
got = by_hand(None, dev)
want = by_hand(gloo, dev)
check(len(got) == len(want) and all(same(a, b) for a, b in zip(got, want)),
      "hand-written pipeline: stage parameters after training")
initial = [p.detach() for p in stage_module().parameters()]
check(not all(same(a, b) for a, b in zip(got, initial)), "hand-written pipeline: parameters changed")
# The tolerance of the pipelining check on CUDA must still see a corrupted
# message: one whose rows came out of order differs beyond it.
cpu = want if DEVICE == "cpu" else by_hand(gloo, torch.device("cpu"))
corrupted = by_hand(gloo, torch.device("cpu"), corrupt=True)  # every rank takes part
check(R == 0 or not close(corrupted, cpu),
      "a message with its rows out of order is beyond the tolerance")
if DEVICE == "cuda":
    check(close(got, cpu), "hand-written pipeline: GPU parameters within 1e-4 of the CPU's")

extra = ""
try:
    import torch.distributed.pipelining  # noqa: F401
except ImportError as e:
    extra = f"(no torch.distributed.pipelining: {e})"
else:
    got = with_pipelining(None, dev)
    want = with_pipelining(gloo, torch.device("cpu"))
    if DEVICE == "cuda":
        check(close(got, want), "torch.distributed.pipelining GPipe: stage parameters after "
              "training, within 1e-4 of gloo's on the CPU")
    else:
        check(len(got) == len(want) and all(same(a, b) for a, b in zip(got, want)),
              "torch.distributed.pipelining GPipe: stage parameters after training")
    check(not all(same(a, b) for a, b in zip(got, initial)), "pipelining: parameters changed")
    extra = "(hand-written and torch.distributed.pipelining)"
dist.barrier()
finish(extra)
