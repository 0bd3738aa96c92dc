"""SMDDP's 1.x DistributedDataParallel (see .distributed), deprecated: use
torch.nn.parallel.DistributedDataParallel on backend "smddp"."""

import warnings

from smdistributed.dataparallel.torch.parallel.distributed import (  # noqa: F401
    DistributedDataParallel,
)

# stacklevel 2: the script's import line (see ..distributed)
warnings.warn(
    "smdistributed.dataparallel.torch.parallel.DistributedDataParallel is SMDDP's 1.x API, "
    "deprecated: use torch.nn.parallel.DistributedDataParallel after "
    "torch.distributed.init_process_group(backend=\"smddp\") (SMDDP 1.4 and later)",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["DistributedDataParallel"]
