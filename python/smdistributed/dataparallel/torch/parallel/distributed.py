"""SMDDP's 1.x DistributedDataParallel: torch's, on the default group
(backend "smddp"), with the 1.x arguments.

    from smdistributed.dataparallel.torch.parallel.distributed import \\
        DistributedDataParallel as DDP
    model = DDP(model, device_ids=[dist.get_local_rank()])

Arguments beyond the 1.x ones (find_unused_parameters, gradient_as_bucket_view...)
are refused with a TypeError that names torch's class, which takes them.
Unlike SMDDP 1.x, broadcast_buffers works (torch's default, True, is
kept) and CPU modules train too.
"""

import torch.nn.parallel

import smdistributed.dataparallel.torch.distributed as _dist1

_ARGS = ("module", "device_ids", "output_device", "broadcast_buffers", "process_group",
         "bucket_cap_mb")


class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
    """torch.nn.parallel.DistributedDataParallel over group.WORLD, with SMDDP
    1.x's arguments: module, device_ids, output_device, broadcast_buffers
    (True), process_group (None or group.WORLD), bucket_cap_mb (25).
    no_sync() and everything else are torch's."""

    def __init__(self, module, device_ids=None, output_device=None, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, **kwargs):
        if kwargs:
            raise TypeError(
                "smdistributed.dataparallel: DistributedDataParallel got "
                f"{', '.join(sorted(kwargs))}: SMDDP's 1.x class takes {', '.join(_ARGS)}; "
                "torch.nn.parallel.DistributedDataParallel takes the others, on backend "
                "\"smddp\" too (SMDDP 1.4 and later)"
            )
        _dist1._check_group(process_group, "DistributedDataParallel")
        _dist1._check_initialized("DistributedDataParallel")
        kw = {}
        if not broadcast_buffers:
            # torch's default syncs them; torch 2.15 warns that the argument
            # is deprecated whenever it is given, but False has no other
            # spelling yet
            kw["broadcast_buffers"] = False
        super().__init__(
            module,
            device_ids=device_ids,
            output_device=output_device,
            bucket_cap_mb=25 if bucket_cap_mb is None else bucket_cap_mb,
            **kw,
        )
