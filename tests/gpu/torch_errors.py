"""torch_errors.py CASE DEVICE - one error path of the smddp backend: raised, or a crash?

Run by lab/gpu/run-on-device.sh torch-errors under smddp-run, 2 ranks.
Each case must raise a Python exception with libsmddp's or the shim's
sentence; the process must not die of a signal (seen on the GPU machine:
SIGSEGV while the shim's message was formatted).  Cases:
  splits  all_to_all_single with split sizes that do not add up (the
          shim's own TORCH_CHECK_VALUE, with integers in its message)
  root    broadcast from a rank outside the group (torch's check)
  size    a receive of the wrong size (libsmddp's SMDDP_EMISMATCH,
          raised from the worker thread through wait())
  dead    (cuda, SMDDP_CUDA_ASYNC=1; issue 14) rank 1 dies once it queued
          an all_reduce, so rank 0's fails on the GPU after its call
          returned: rank 0, making no call, must see it in exception()
          within 2 s + SMDDP_LIVENESS_MS, naming rank 1; then wait() and
          the next call raise, and torch.cuda.synchronize() returns
  deadsync  (cuda, SMDDP_CUDA_ASYNC=1) as dead, but rank 0's all_reduce is
          one torch waits for at once (async_op=False: on the current
          stream, no Work where torch >= 2.8): nothing to wait on, so
          rank 0's next call must raise, naming rank 1, once the
          backend's poll found the failure
Prints "ERRORS-OK rank=R CASE DEVICE: Type: message" when it raised.
"""
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

import smddp.torch  # noqa: F401  (registers the backend)



def bounded(what, fn, secs):
    """fn() on a thread, given secs: a hang is a failure, not a stuck job."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(secs)
    if t.is_alive():
        print(f"ERRORS-HANG rank={R}: {what} did not return within {secs} s", flush=True)
        os._exit(1)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def dead(sync=False):
    """Issue 14: a collective that fails on the GPU after its call returned."""
    if os.environ.get("SMDDP_CUDA_ASYNC") != "1":
        sys.exit("torch_errors.py dead: run it with SMDDP_CUDA_ASYNC=1 (calls that queue)")
    x = torch.ones(1 << 20, device="cuda")
    # the first device call of a communicator blocks; the later ones queue
    for _ in range(3):
        dist.all_reduce(x)
    bounded("warm-up synchronize", torch.cuda.synchronize, 30)
    dist.barrier()
    if R == 1:
        # Keep this rank's part from starting (its input is behind a
        # ~2 s kernel), queue it, and die with status 0, so that smddp-run
        # does not stop rank 0 (which must find out by itself).
        torch.cuda._sleep(4_000_000_000)
        dist.all_reduce(x, async_op=True)
        os._exit(0)
    limit = 2.0 + int(os.environ.get("SMDDP_LIVENESS_MS", "50")) / 1000
    if sync:
        dead_sync(x, limit)
    work = dist.all_reduce(x, async_op=True)
    t0 = time.monotonic()
    # No call: is_success() only reads what the backend's own poll found
    # (exception() says the same, but torch 2.11 cannot return it to Python).
    while work.is_success() and time.monotonic() - t0 < limit + 10:
        time.sleep(0.01)
    took = time.monotonic() - t0
    if work.is_success():
        sys.exit(f"ERRORS-NONE rank={R}: the failed all_reduce still says success "
                 f"after {took:.1f} s")
    if took > limit:
        sys.exit(f"ERRORS-SLOW rank={R}: the failure took {took:.2f} s to show, "
                 f"more than {limit:.2f} s")
    if not work.is_completed():
        sys.exit(f"ERRORS-STATE rank={R}: is_success() is False, is_completed() too")
    try:
        bounded("wait()", work.wait, 10)
        sys.exit(f"ERRORS-NONE rank={R}: wait() of the failed all_reduce returned")
    except dist.DistBackendError as e:
        if "rank 1" not in str(e):
            sys.exit(f"ERRORS-WHO rank={R}: the failure does not name rank 1: {e}")
        print(f"ERRORS-OK rank={R} dead cuda: failed after {took:.2f} s, wait(): {str(e)[:400]}",
              flush=True)
    t1 = time.monotonic()
    try:
        bounded("the next all_reduce", lambda: dist.all_reduce(x), 10)
        sys.exit(f"ERRORS-NONE rank={R}: the next all_reduce returned")
    except dist.DistBackendError as e:
        if time.monotonic() - t1 > 1 or "rank 1" not in str(e):
            sys.exit(f"ERRORS-NEXT rank={R}: after {time.monotonic() - t1:.2f} s: {e}")
        print(f"ERRORS-OK rank={R} dead cuda: next call: {str(e)[:240]}", flush=True)
    # the library releases the stream whatever happened
    timeout = int(os.environ.get("SMDDP_TIMEOUT", "30")) + 10
    bounded("torch.cuda.synchronize()", torch.cuda.synchronize, timeout)
    bounded("destroy_process_group()", dist.destroy_process_group, timeout)
    print(f"ERRORS-OK rank={R} dead cuda: synchronize() and destroy_process_group() returned",
          flush=True)
    sys.exit(0)


def dead_sync(x, limit):
    """dead() with async_op=False on rank 0: no Work to ask, the next call raises."""
    dist.all_reduce(x)
    t0 = time.monotonic()
    raised = None
    while raised is None and time.monotonic() - t0 < limit + 10:
        time.sleep(0.2)
        try:
            bounded("the next all_reduce", lambda: dist.all_reduce(torch.ones(1, device="cuda")),
                    10)
        except dist.DistBackendError as e:
            raised = e
    took = time.monotonic() - t0
    if raised is None:
        sys.exit(f"ERRORS-NONE rank={R}: calls after the failed all_reduce(async_op=False) "
                 f"still returned after {took:.1f} s")
    if "rank 1" not in str(raised):
        sys.exit(f"ERRORS-WHO rank={R}: the failure does not name rank 1: {raised}")
    print(f"ERRORS-OK rank={R} deadsync cuda: a call raised after {took:.2f} s: "
          f"{str(raised)[:300]}", flush=True)
    timeout = int(os.environ.get("SMDDP_TIMEOUT", "30")) + 10
    bounded("torch.cuda.synchronize()", torch.cuda.synchronize, timeout)
    bounded("destroy_process_group()", dist.destroy_process_group, timeout)
    print(f"ERRORS-OK rank={R} deadsync cuda: synchronize() and destroy_process_group() "
          "returned", flush=True)
    sys.exit(0)


case, dev = sys.argv[1], sys.argv[2]
dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
if dev == "cuda":
    torch.cuda.set_device(0)
if case in ("dead", "deadsync"):
    dead(sync=case == "deadsync")
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
