"""common.py - what the backend's tests share: start a rank, report, compare.

Each test runs as one process per rank, started by smddp-run, torchrun,
mpirun or itself (spawn), and prints one line per rank at the end:
"TORCH-OK rank=R ..." (exit 0) or "TORCH-BAD rank=R: why" (exit 1).
"""
import os
import sys
import time

import torch
import torch.distributed as dist

import smddp.torch  # noqa: F401  registers the backend

failures = []
checks = 0


def rank():
    return dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        print(f"rank {rank()}: FAILED: {what}", flush=True)


def same(a, b):
    """Bit for bit, NaNs included."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if a.is_floating_point():
        return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
    return torch.equal(a, b)


def finish(extra=""):
    r = rank()
    if failures:
        line = (f"TORCH-BAD rank={r}: {len(failures)} of {checks} checks failed, first: "
                f"{failures[0]}")
        code = 1
    else:
        line = f"TORCH-OK rank={r} {checks} checks {extra}".rstrip()
        code = 0
    # one write: ranks sharing a pipe (torchrun) must not split each other's lines
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    if dist.is_initialized():
        dist.destroy_process_group()
    # Not sys.exit: destroy_process_group leaves gloo's reference group's
    # worker threads running (they stop when the object is freed), and one
    # that frees a tensor during interpreter shutdown aborts the process
    # (a torch race).  smddp's own exit path is tested by test_init.py exit.
    sys.stderr.flush()
    os._exit(code)


def expect_error(fn, words, what, kind=RuntimeError):
    """fn() must raise kind (DistBackendError is a RuntimeError) saying words."""
    global checks
    try:
        fn()
    except kind as e:
        checks += 1
        msg = str(e)
        if not all(w.lower() in msg.lower() for w in words):
            failures.append(f"{what}: message does not say {words}: {msg[:300]}")
        return msg
    except Exception as e:  # the wrong kind of error
        checks += 1
        failures.append(f"{what}: raised {type(e).__name__} instead of {kind}: {e}")
        return None
    checks += 1
    failures.append(f"{what}: no error")
    return None


class Deadline:
    """A bound on a step of a test, so that a hang fails the test."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()
