"""Registers libsmddp's "smddp" torch.distributed backend under SageMaker's
module path::

    import smdistributed.dataparallel.torch.torch_smddp
    dist.init_process_group(backend="smddp")

It is ``import smddp.torch`` by another name.  This module must not be
installed beside AWS's own smdistributed package, which owns the same path.
"""

import smddp.torch  # noqa: F401  (registers the backend)
from smddp.torch import is_available  # noqa: F401
