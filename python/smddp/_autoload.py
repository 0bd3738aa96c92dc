"""Entry point of the "torch.backends" group, which torch >= 2.5 calls at
``import torch`` (see pyproject.toml).

Where torch also reads the "torch.distributed.backends" group (2.15 does,
2.11 does not), torch registers "smddp" when a program first asks for it,
and this does nothing, so that ``import torch`` does not load libsmddp for programs
that never use it.  Elsewhere it registers the backend at once.  It never
raises: a failure here would make ``import torch`` itself fail.
"""

import sys
import warnings


def autoload():
    # `import smddp.torch` imports torch, which calls this: that import
    # registers the backend when it finishes.
    if "smddp.torch" in sys.modules:
        return
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return
        if hasattr(dist.Backend, "_ensure_backend_registered"):
            return
        from smddp.torch import register_backend

        register_backend()
    except Exception as e:  # noqa: BLE001 - see the module docstring
        warnings.warn(
            f"smddp: the torch.distributed backend was not registered at torch import ({e}); "
            "`import smddp.torch` says why",
            RuntimeWarning,
            stacklevel=2,
        )
