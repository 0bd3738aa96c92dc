"""The "smddp" backend of torch.distributed, over libsmddp.

Usage::

    import torch.distributed as dist
    import smddp.torch                      # registers the backend

    dist.init_process_group(backend="smddp")
    # or init_method="tcp://host:port" / "file:///path", as with any backend

Sub-groups (``dist.new_group(ranks, backend="smddp")``) each get their own
communicator, and live beside groups of other backends.  CPU tensors always
work; CUDA tensors when this extension was built with its CUDA path (see
``cuda_built()``) and libsmddp with CUDA.  DDP, its communication hooks
(fp16/bf16 compression), FSDP and DeepSpeed use the collectives supported:
all_reduce (SUM, AVG, PRODUCT, MIN, MAX, PREMUL_SUM; SUM of sparse COO
tensors), broadcast, reduce, all_gather, all_gather_into_tensor,
reduce_scatter, reduce_scatter_tensor, all_to_all_single (any split sizes),
all_to_all, gather, scatter, barrier, and their coalesced forms; send,
recv (from a given rank or any), isend, irecv and batch_isend_irecv
(pipeline parallelism); split_group and shrink_group (survivors go on
without a dead rank) from torch 2.15.  A send completes once
its receive took the data, as with NCCL: a rank that sends to and receives
from the same peers at once batches them (batch_isend_irecv).  What is not
supported (reductions on int16, bitwise reductions, sparse layouts other
than COO) raises NotImplementedError or ValueError instead of running.

The import is optional where torch loads the backend by itself: torch 2.15
through this package's "torch.distributed.backends" entry point, when a
program asks for "smddp"; earlier torch (from 2.5) at ``import torch``,
through its "torch.backends" entry point.  SageMaker programs that
``import smdistributed.dataparallel.torch.torch_smddp`` get the same backend.

Nothing here reads or sets environment variables: torch makes the store from
init_method (env://, tcp://, file://) and the backend rendezvouses through it.
"""

import atexit
import inspect
import os

import torch
import torch.distributed as dist

import smddp

__all__ = [
    "is_available",
    "register_backend",
    "library_version",
    "cuda_built",
    "BACKEND_NAME",
    "__version__",
]

#: The name to pass to init_process_group and new_group.
BACKEND_NAME = "smddp"

#: The version of this package (that of the libsmddp headers it was built with).
__version__ = smddp.__version__

# Some libfabric builds (Debian's) link PSM libraries that, unless these are
# set, catch SIGTERM, SIGINT (so KeyboardInterrupt), SIGSEGV, ... when they
# load (with _C, through libsmddp) and exit from the handler.  Off unless
# the user decided, as Open MPI and smddp-run do.
for _var in ("IPATH_NO_BACKTRACE", "HFI_NO_BACKTRACE"):
    os.environ.setdefault(_var, "1")

try:
    from smddp import _C
except ImportError as _e:  # libsmddp or torch do not match: see _create
    _C = None
    _import_error = _e
else:
    _import_error = None
    # Groups the script never destroyed stop before the interpreter
    # finalizes: their threads may still hold tensors, and a thread that
    # frees one after that point aborts the process (exit status 134).
    atexit.register(_C._stop_all_at_exit)


def is_available():
    """True when the backend can be used: torch has torch.distributed and the
    extension loaded (with the libsmddp it was built against)."""
    return _C is not None and dist.is_available()


def library_version():
    """The version of the libsmddp the extension runs with ("0.1.0"), or None
    when the extension did not load."""
    return _C.library_version() if _C is not None else None


def cuda_built():
    """Whether the extension was built with its CUDA path (False when it did
    not load)."""
    return bool(_C is not None and _C.cuda_built())


def _set_cuda_inline(on):
    """False: every CUDA collective goes through its group's worker thread, also
    where libsmddp queues device calls (docs/torch.md, "CUDA tensors: the
    worker or the caller's thread"); True (the default): the collectives that
    queue run on the caller's thread.  For benchmarks that compare the two."""
    _C._set_cuda_inline(bool(on))


def _cuda_path_stats(group=None):
    """How the CUDA works of group (default: the world) ran: a dict with the
    communicator's "mode" (queued, blocking, undecided), and how many ran
    "inline" (on the caller's thread) and on the "worker"."""
    pg = group if group is not None else dist.group.WORLD
    return pg._get_backend(torch.device("cuda"))._cuda_path_stats()


def _create(store, rank, size, timeout):
    # torch calls this on the group's members only, with the group's store.
    if _C is None:
        raise RuntimeError(
            f"smddp: the backend's extension did not load: {_import_error}"
        ) from _import_error
    return _C.ProcessGroupSMDDP(store, rank, size, timeout)


def _registered_creator():
    plugin = getattr(dist.Backend, "_plugins", {}).get(BACKEND_NAME.upper())
    if plugin is None:
        return None
    return getattr(plugin, "creator_fn", plugin)


def register_backend():
    """Registers "smddp" with torch.distributed; nothing when it is already.

    Called on import, and by torch through the "torch.distributed.backends"
    entry point.  Raises RuntimeError when another package registered a
    backend of that name (AWS's smdistributed.dataparallel).
    """
    if not dist.is_available():
        raise RuntimeError(
            f"smddp: torch {torch.__version__} was built without torch.distributed"
        )
    creator = _registered_creator()
    if creator is _create or getattr(creator, "__module__", None) == __name__:
        return  # by this module (or an earlier load of it)
    if creator is not None or hasattr(dist.Backend, BACKEND_NAME.upper()):
        raise RuntimeError(
            f"smddp: another package registered a torch.distributed backend named "
            f"{BACKEND_NAME!r} ({getattr(creator, '__module__', creator)}); "
            "uninstall one of them (AWS's smdistributed-dataparallel and this one "
            "cannot be used together)"
        )
    kwargs = {}
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu", "cuda"]
    dist.Backend.register_backend(BACKEND_NAME, _create, **kwargs)


register_backend()
