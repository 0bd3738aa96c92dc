"""libsmddp for Python.

``import smddp.torch`` registers the "smddp" backend of torch.distributed (see
its docstring).  This package itself imports nothing heavy: torch and the
compiled extension load only with ``smddp.torch``.
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("smddp")
except PackageNotFoundError:  # not installed: run from the source tree
    __version__ = "0+unknown"
