"""SMDDP's first PyTorch API (smdistributed-dataparallel 1.0 to 1.3), over
torch.distributed with backend "smddp", for scripts written for it::

    import smdistributed.dataparallel.torch.distributed as dist
    from smdistributed.dataparallel.torch.parallel.distributed import \\
        DistributedDataParallel as DDP

    dist.init_process_group()
    torch.cuda.set_device(dist.get_local_rank())
    model = DDP(model.cuda())

Deprecated, as SageMaker deprecated it in SMDDP 1.4: new code uses
torch.distributed itself (see _HOWTO).  Every call here is the
torch.distributed call of the same name on the default group, which runs
on backend "smddp".  What the 1.x API did not have is refused with an
error that says what to use instead: process groups other than
``group.WORLD``, reductions other than ``ReduceOp.SUM``, ``AVERAGE``,
``MIN`` and ``MAX``, a default group of another backend.
"""

import os
import warnings

import torch.distributed as _dist

import smddp.torch as _smddp_torch

__all__ = [
    "ReduceOp",
    "group",
    "is_available",
    "init_process_group",
    "is_initialized",
    "get_world_size",
    "get_rank",
    "get_local_rank",
    "get_local_size",
    "all_reduce",
    "broadcast",
    "all_gather",
    "all_to_all_single",
    "barrier",
]

_HOWTO = (
    "use torch.distributed with backend \"smddp\" instead (SMDDP 1.4 and later): "
    "import smdistributed.dataparallel.torch.torch_smddp, "
    "torch.distributed.init_process_group(backend=\"smddp\"), and "
    "torch.nn.parallel.DistributedDataParallel"
)

# stacklevel 2: the line that imports this module (import machinery is
# skipped), so that Python's default filters show it to a script's
# __main__ and hide it from libraries that import it.
warnings.warn(
    "smdistributed.dataparallel.torch.distributed is SMDDP's 1.x API, deprecated: " + _HOWTO,
    DeprecationWarning,
    stacklevel=2,
)


class ReduceOp:
    """The reductions of the 1.x API; their values are torch's."""

    SUM = _dist.ReduceOp.SUM
    AVERAGE = _dist.ReduceOp.AVG
    MIN = _dist.ReduceOp.MIN
    MAX = _dist.ReduceOp.MAX


_OPS = (ReduceOp.SUM, ReduceOp.AVERAGE, ReduceOp.MIN, ReduceOp.MAX)


class _World:
    def __repr__(self):
        return "smdistributed.dataparallel.torch.distributed.group.WORLD"


class group:  # noqa: N801  (the 1.x API's name)
    """group.WORLD: every rank, the only process group of the 1.x API."""

    WORLD = _World()


def _check_group(g, where):
    if g is None or g is group.WORLD:
        return
    if _dist.is_initialized() and g is _dist.group.WORLD:
        return
    raise ValueError(
        f"smdistributed.dataparallel: {where}: group={g!r}: the 1.x API has one process "
        "group, group.WORLD; for sub-groups use torch.distributed.new_group(ranks, "
        "backend=\"smddp\") and torch.distributed's calls (SMDDP 1.4 and later)"
    )


def _check_initialized(where):
    if not _dist.is_initialized():
        raise RuntimeError(
            f"smdistributed.dataparallel: {where}: call "
            "smdistributed.dataparallel.torch.distributed.init_process_group() first"
        )
    backend = _dist.get_backend()
    if backend != _smddp_torch.BACKEND_NAME:
        raise RuntimeError(
            f"smdistributed.dataparallel: {where}: the default process group runs backend "
            f"{backend!r}, not \"smddp\": initialize it with "
            "smdistributed.dataparallel.torch.distributed.init_process_group(), or use "
            "torch.distributed's own calls"
        )


def _launched():
    return all(v in os.environ for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def is_available():
    """True when this process was started as a distributed job (by
    smddp-run, torchrun... : RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    are set) or already initialized, and the backend loaded.  A script run
    on its own sees False and can train without the calls of this module."""
    return _smddp_torch.is_available() and (_dist.is_initialized() or _launched())


def init_process_group(backend=_smddp_torch.BACKEND_NAME, **kwargs):
    """torch.distributed.init_process_group(backend="smddp", **kwargs):
    env:// by default, as smddp-run, torchrun or SageMaker start the ranks
    (init_method, store, timeout, rank and world_size are torch's).  Does
    nothing when the default group already runs on smddp (the Hugging Face
    Trainer initializes it before a script's own call)."""
    if backend != _smddp_torch.BACKEND_NAME:
        raise ValueError(
            f"smdistributed.dataparallel: init_process_group(backend={backend!r}): the 1.x API "
            "runs on backend \"smddp\" only; for another backend call "
            "torch.distributed.init_process_group"
        )
    if _dist.is_initialized():
        _check_initialized("init_process_group")
        return
    if not _smddp_torch.is_available():
        raise RuntimeError(
            "smdistributed.dataparallel: init_process_group(): the \"smddp\" backend's "
            f"extension did not load: {_smddp_torch._import_error}"
        )
    if "init_method" not in kwargs and "store" not in kwargs and not _launched():
        missing = [
            v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ
        ]
        raise RuntimeError(
            "smdistributed.dataparallel: init_process_group(): this process was not started "
            f"as a distributed job ({', '.join(missing)} not set): launch it with smddp-run "
            "(smddp-run -n 2 python train.py), torchrun or SageMaker; is_available() says "
            "beforehand whether it was"
        )
    _dist.init_process_group(backend=_smddp_torch.BACKEND_NAME, **kwargs)


def is_initialized():
    """Whether init_process_group() was called (the default group exists)."""
    return _dist.is_initialized()


def get_world_size(group=group.WORLD):  # noqa: F811  (the 1.x signature)
    """The number of ranks in the job."""
    _check_group(group, "get_world_size")
    _check_initialized("get_world_size")
    return _dist.get_world_size()


def get_rank(group=group.WORLD):  # noqa: F811
    """This process's rank in the job, 0 to get_world_size() - 1."""
    _check_group(group, "get_rank")
    _check_initialized("get_rank")
    return _dist.get_rank()


def _env_int(names, what):
    for name in names:
        value = os.environ.get(name)
        if value is not None and value != "":
            try:
                return int(value)
            except ValueError:
                raise RuntimeError(
                    f"smdistributed.dataparallel: {what}: {name}={value!r} is not a number"
                ) from None
    raise RuntimeError(
        f"smdistributed.dataparallel: {what}: none of {', '.join(names)} is set: launch the "
        "job with smddp-run (or torchrun), which sets them"
    )


def get_local_rank():
    """This process's rank among the ranks of its host (the GPU it uses):
    SMDATAPARALLEL_LOCAL_RANK, as SageMaker's launcher and smddp-run set
    it, else LOCAL_RANK (torchrun)."""
    _check_initialized("get_local_rank")
    return _env_int(
        ("SMDATAPARALLEL_LOCAL_RANK", "LOCAL_RANK", "SMDDP_LOCAL_RANK"), "get_local_rank"
    )


def get_local_size():
    """The number of ranks on this host (LOCAL_WORLD_SIZE)."""
    _check_initialized("get_local_size")
    return _env_int(
        ("LOCAL_WORLD_SIZE", "SMDDP_LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"),
        "get_local_size",
    )


def all_reduce(tensor, op=ReduceOp.SUM, group=group.WORLD, async_op=False):  # noqa: F811
    """Reduces tensor in place across every rank; a Work with async_op."""
    if op is None:
        op = ReduceOp.SUM
    if not any(op == o for o in _OPS):
        raise ValueError(
            f"smdistributed.dataparallel: all_reduce: op={op!r}: the 1.x API reduces with "
            "ReduceOp.SUM, AVERAGE, MIN or MAX; torch.distributed.all_reduce on backend "
            "\"smddp\" also takes PRODUCT and PREMUL_SUM"
        )
    _check_group(group, "all_reduce")
    _check_initialized("all_reduce")
    return _dist.all_reduce(tensor, op=op, async_op=async_op)


def broadcast(tensor, src=0, group=group.WORLD, async_op=False):  # noqa: F811
    """Copies rank src's tensor into every rank's."""
    _check_group(group, "broadcast")
    _check_initialized("broadcast")
    return _dist.broadcast(tensor, src, async_op=async_op)


def all_gather(tensor_list, tensor, group=group.WORLD, async_op=False):  # noqa: F811
    """tensor_list[r] = rank r's tensor, on every rank."""
    _check_group(group, "all_gather")
    _check_initialized("all_gather")
    return _dist.all_gather(tensor_list, tensor, async_op=async_op)


def all_to_all_single(
    output_t,
    input_t,
    output_split_sizes=None,
    input_split_sizes=None,
    group=group.WORLD,  # noqa: F811
    async_op=False,
):
    """Scatters input_t's slices to the ranks, gathers theirs into output_t."""
    _check_group(group, "all_to_all_single")
    _check_initialized("all_to_all_single")
    return _dist.all_to_all_single(
        output_t, input_t, output_split_sizes, input_split_sizes, async_op=async_op
    )


def barrier(group=group.WORLD, async_op=False):  # noqa: F811
    """Returns (or completes its Work) once every rank called it."""
    _check_group(group, "barrier")
    _check_initialized("barrier")
    return _dist.barrier(async_op=async_op)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"smdistributed.dataparallel.torch.distributed has no {name!r}: SMDDP's 1.x API "
        f"offers {', '.join(__all__)}; for the rest, {_HOWTO}"
    )
