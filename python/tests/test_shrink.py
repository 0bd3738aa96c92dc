"""test_shrink.py - dist.shrink_group on smddp (torch 2.15+): survivors go on.

  test_shrink.py kill VICTIM [abort]   VICTIM SIGKILLs itself at step 3 of DDP
                                       training; the others catch the
                                       DistBackendError, shrink the default group
                                       around it and train on, then run
                                       collectives on the new group
  test_shrink.py fsdp VICTIM           the same under FSDP: the survivors keep the
                                       full parameters of the last completed step
                                       (the dead rank's shard is lost with it),
                                       shrink, wrap a model made from them in FSDP
                                       on the new group and train on
  test_shrink.py planned EXCLUDED      a healthy group drops EXCLUDED (which
                                       leaves: destroy_process_group, exit 0)

Run under smddp-run --on-failure continue, which serves torch's store itself
(TORCHELASTIC_USE_AGENT_STORE): rank 0 may die.  References are computed here by
hand: the survivors' DDP parameters against plain SGD on the same data with
the gradients averaged over the ranks alive at each step, the collectives
against the survivors' old ranks.
"""
import gc
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from common import Deadline, check, expect_error, finish  # noqa: E402

STEPS, DEATH = 6, 3


def data(rank, step):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(4, 8, generator=g), torch.randn(4, 3, generator=g)


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))


def reference_step(model, ranks, step, lr):
    """SGD with the gradient averaged over ranks, on one process."""
    grads = [torch.zeros_like(p) for p in model.parameters()]
    for r in ranks:
        model.zero_grad()
        x, y = data(r, step)
        nn.functional.mse_loss(model(x), y).backward()
        for g, p in zip(grads, model.parameters()):
            g += p.grad / len(ranks)
    with torch.no_grad():
        for g, p in zip(grads, model.parameters()):
            p -= lr * g


def params_close(a, b):
    return all(torch.allclose(p, q, rtol=1e-5, atol=1e-6)
               for p, q in zip(a.parameters(), b.parameters()))


def check_collectives(old_rank, survivors):
    """The new default group: size, rank, and collectives against references."""
    n = len(survivors)
    check(dist.get_world_size() == n, f"world size {dist.get_world_size()}, expected {n}")
    check(dist.get_rank() == survivors.index(old_rank),
          f"new rank {dist.get_rank()}, expected {survivors.index(old_rank)} "
          f"(survivors in old order: {survivors})")
    t = torch.full((5,), float(old_rank + 1))
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((5,), float(sum(r + 1 for r in survivors)))),
          f"all_reduce after the shrink: {t.tolist()}")
    out = [torch.zeros(2, dtype=torch.int64) for _ in range(n)]
    dist.all_gather(out, torch.tensor([old_rank, 7 * old_rank]))
    check([o.tolist() for o in out] == [[r, 7 * r] for r in survivors],
          f"all_gather after the shrink: {[o.tolist() for o in out]}")
    b = torch.tensor([float(old_rank)])
    dist.broadcast(b, src=0)
    check(b.item() == survivors[0], f"broadcast from the new rank 0: {b.item()}")
    dist.barrier()


def kill(victim, abort):
    dist.init_process_group(backend="smddp", timeout=__import__("datetime").timedelta(seconds=60))
    R, N = dist.get_rank(), dist.get_world_size()
    lr = 0.1
    model = make_model()
    ref = make_model()
    ddp = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    alive = list(range(N))
    step = 0
    failed_at = None
    while step < STEPS:
        if step == DEATH and R == victim:
            print(f"rank {R}: dying at step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        opt.zero_grad()
        x, y = data(R, step)
        error = None
        try:
            nn.functional.mse_loss(ddp(x), y).backward()
        except dist.DistBackendError as e:
            error = str(e)
        if error is not None:
            failed_at = step
            took = Deadline(30)
            check(f"rank {victim}" in error, f"the error does not name rank {victim}: "
                  f"{error[:300]}")
            alive = [r for r in range(N) if r != victim]
            flags = c10d.SHRINK_ABORT if abort else c10d.SHRINK_DEFAULT
            old_backend = dist.group.WORLD._get_backend(torch.device("cpu"))
            # the old wrapper goes (its reducer's hooks with it)
            ddp = None
            gc.collect()
            new = dist.shrink_group([victim], shrink_flags=flags)
            check(took.left() > 0, "shrink_group took more than 30 s")
            check(dist.group.WORLD is new, "the default group was not replaced")
            # the old group takes no more calls
            expect_error(lambda: old_backend.allreduce([torch.ones(1)]).wait(), ["shrunk"],
                         "a call on the shrunk group")
            check_collectives(R, alive)
            # the same module, wrapped again on the new group; the failed
            # step is run again by the survivors
            ddp = DDP(model)
            opt = torch.optim.SGD(model.parameters(), lr=lr)
            continue
        opt.step()
        reference_step(ref, alive, step, lr)
        step += 1
    check(failed_at == DEATH, f"the death was seen at step {failed_at}, not {DEATH}")
    check(params_close(model, ref), "parameters differ from the reference "
          "(plain SGD over the ranks alive at each step)")
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    everyone = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, flat)
    check(all(torch.equal(e, everyone[0]) for e in everyone),
          "the survivors' parameters disagree")
    store = "launcher" if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" else "rank0"
    finish(f"old rank {R} of {N}, now {dist.get_rank()} of {dist.get_world_size()} "
           f"store={store}")


def full_params(fsdp_model):
    """The full parameters of an FSDP model (a collective: every rank calls it)."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    with FSDP.summon_full_params(fsdp_model, writeback=False):
        return [p.detach().clone() for p in fsdp_model.parameters()]


def fsdp(victim):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    def wrap(params):
        model = make_model()
        with torch.no_grad():
            for p, q in zip(model.parameters(), params):
                p.copy_(q)
        return FSDP(model, device_id=torch.device("cpu"), use_orig_params=True)

    dist.init_process_group(backend="smddp", timeout=__import__("datetime").timedelta(seconds=60))
    R, N = dist.get_rank(), dist.get_world_size()
    lr = 0.1
    ref = make_model()
    model = wrap(list(make_model().parameters()))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    # What a survivor rebuilds from: the full parameters after the last
    # completed step (plain SGD keeps no other state). A sharded job loses
    # the dead rank's shard with it, so it must keep such a copy (or a
    # checkpoint) to go on.
    saved = full_params(model)
    alive = list(range(N))
    step = 0
    failed_at = None
    while step < STEPS:
        if step == DEATH and R == victim:
            print(f"rank {R}: dying at step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        opt.zero_grad()
        x, y = data(R, step)
        error = None
        try:
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            saved = full_params(model)
        except dist.DistBackendError as e:
            error = str(e)
        if error is not None:
            failed_at = step
            took = Deadline(30)
            check(f"rank {victim}" in error, f"the error does not name rank {victim}: "
                  f"{error[:300]}")
            alive = [r for r in range(N) if r != victim]
            # the old wrapper and its optimizer go, with their hooks and shards
            model = opt = None
            gc.collect()
            new = dist.shrink_group([victim])
            check(took.left() > 0, "shrink_group took more than 30 s")
            check(dist.group.WORLD is new, "the default group was not replaced")
            check_collectives(R, alive)
            # a fresh FSDP job of the survivors, from the state at the failure;
            # the failed step is run again
            model = wrap(saved)
            opt = torch.optim.SGD(model.parameters(), lr=lr)
            continue
        reference_step(ref, alive, step, lr)
        step += 1
    check(failed_at == DEATH, f"the death was seen at step {failed_at}, not {DEATH}")
    final = full_params(model)
    check(all(torch.allclose(p, q, rtol=1e-5, atol=1e-6)
              for p, q in zip(final, ref.parameters())),
          "parameters differ from the reference (plain SGD over the ranks alive at each "
          "step, from the state at the failure)")
    flat = torch.cat([p.flatten() for p in final])
    everyone = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, flat)
    check(all(torch.equal(e, everyone[0]) for e in everyone),
          "the survivors' parameters disagree")
    finish(f"old rank {R} of {N}, now {dist.get_rank()} of {dist.get_world_size()} fsdp")


def planned(excluded):
    dist.init_process_group(backend="smddp")
    R, N = dist.get_rank(), dist.get_world_size()
    t = torch.ones(3)
    dist.all_reduce(t)
    check(t.tolist() == [float(N)] * 3, f"all_reduce before: {t.tolist()}")
    if R == excluded:
        # leaves: not part of the shrink
        dist.destroy_process_group()
        print(f"TORCH-OK rank={R} left the job", flush=True)
        os._exit(0)
    survivors = [r for r in range(N) if r != excluded]
    dist.shrink_group([excluded])
    check_collectives(R, survivors)
    # bad input is refused before anything happens (torch's checks, then ours)
    if dist.get_world_size() > 1:
        expect_error(lambda: dist.shrink_group([dist.get_rank()]),
                     ["exclusion list"], "excluding this rank itself")
    finish(f"old rank {R} of {N}, now {dist.get_rank()} of {dist.get_world_size()}")


if __name__ == "__main__":
    if sys.argv[1] == "kill":
        kill(int(sys.argv[2]), len(sys.argv) > 3 and sys.argv[3] == "abort")
    elif sys.argv[1] == "fsdp":
        fsdp(int(sys.argv[2]))
    elif sys.argv[1] == "planned":
        planned(int(sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} kill VICTIM [abort] | fsdp VICTIM | planned RANK")
