"""torch_errors.py CASE DEVICE - one error path of the smddp backend: raised, or a crash?

Run by tests/gpu/run-on-device.sh torch-errors under smddp-run, 2 ranks.
Each case must raise a Python exception with libsmddp's or the shim's
sentence; the process must not die of a signal (seen on the GPU machine:
SIGSEGV while the shim's message was formatted).  Cases:
  splits  all_to_all_single with split sizes that do not add up (the
          shim's own TORCH_CHECK_VALUE, with integers in its message)
  root    broadcast from a rank outside the group (torch's check)
  size    a receive of the wrong size (libsmddp's SMDDP_EMISMATCH,
          raised from the worker thread through wait())
Prints "ERRORS-OK rank=R CASE DEVICE: Type: message" when it raised.
"""
import sys

import torch
import torch.distributed as dist

import smddp.torch  # noqa: F401  (registers the backend)

case, dev = sys.argv[1], sys.argv[2]
dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
if dev == "cuda":
    torch.cuda.set_device(0)
try:
    if case == "splits":
        dist.all_to_all_single(torch.empty(3, device=dev), torch.ones(3, device=dev),
                               [1] * N, [4] + [0] * (N - 1))
    elif case == "root":
        dist.broadcast(torch.ones(3, device=dev), src=N + 5)
    elif case == "size":
        if R == 0:
            # the sender may end well (an eager message) or hear of the refusal
            dist.send(torch.ones(4, device=dev), 1)
            if dev == "cuda":
                torch.cuda.synchronize()
            print(f"ERRORS-OK rank={R} {case} {dev}: the sender ended well", flush=True)
            sys.exit(0)
        elif R == 1:
            dist.recv(torch.ones(3, device=dev), 0)
        else:
            raise RuntimeError("smddp: size: nothing to do on this rank")
        if dev == "cuda":
            torch.cuda.synchronize()
    else:
        sys.exit(f"torch_errors.py: unknown case {case}")
    print(f"ERRORS-NONE rank={R} {case} {dev}: nothing was raised", flush=True)
    sys.exit(1)
except Exception as e:  # noqa: BLE001 - the point is that it is raised at all
    print(f"ERRORS-OK rank={R} {case} {dev}: {type(e).__name__}: {str(e)[:240]}", flush=True)
