"""Builds smddp._C, the C++ shim of the "smddp" torch.distributed backend.

    pip install --no-build-isolation ./python

The shim is compiled with the C++ compiler torch was built for (no nvcc)
against the torch of the running interpreter, and linked with libsmddp,
found in this order:

  SMDDP_BUILD_DIR=DIR   an uninstalled build tree of libsmddp (make, not make
                        install): headers from its source tree (SMDDP_SOURCE_DIR,
                        else the one DIR/Makefile names, else DIR/..), the
                        library from DIR/lib/.libs or DIR/.libs
  SMDDP_PREFIX=DIR      an installed prefix: DIR/include and DIR/lib (or lib64)
  pkg-config smddp      `pkg-config --cflags --libs smddp` (PKG_CONFIG_PATH
                        picks the .pc file); when the prefix it names is not
                        there and the .pc file lies in a build tree, that tree

The library's directory goes into the extension's rpath, so nothing needs
LD_LIBRARY_PATH.  The shim shares torch's C++ runtime: where the compiler
has only a static libstdc++ (a GCC built with --disable-shared, say), the
libstdc++.so.6 that torch loaded is linked instead, since a second copy of
libstdc++ in the process crashes in its locale code.

With a CUDA build of torch and the CUDA toolkit's headers
(CUDA_HOME, else /usr/local/cuda), the CUDA path is compiled too
(SMDDP_TORCH_CUDA=0 leaves it out, =1 makes its absence an error).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import setup

try:
    import torch
    from torch.utils import cpp_extension
except ImportError:
    sys.exit(
        "smddp: torch is needed to build the backend; install torch first and "
        "build with pip install --no-build-isolation ./python"
    )

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = [
    "smddp/csrc/init.cpp",
    "smddp/csrc/ProcessGroupSMDDP.cpp",
    "smddp/csrc/Exchanges.cpp",
    "smddp/csrc/PointToPoint.cpp",
    "smddp/csrc/Tensors.cpp",
    "smddp/csrc/Types.cpp",
    "smddp/csrc/WorkQueue.cpp",
    "smddp/csrc/WorkCompleters.cpp",
]


class SmddpNotFound(Exception):
    pass


def _has_lib(libdir):
    return any(
        os.path.exists(os.path.join(libdir, name))
        for name in ("libsmddp.so", "libsmddp.dylib", "libsmddp.a")
    )


def _has_header(incdir):
    return os.path.exists(os.path.join(incdir, "smddp", "smddp.h"))


def _source_dir_of(build):
    """The source tree an Automake build tree was configured from."""
    candidates = []
    if os.environ.get("SMDDP_SOURCE_DIR"):
        candidates.append(os.environ["SMDDP_SOURCE_DIR"])
    makefile = os.path.join(build, "Makefile")
    if os.path.exists(makefile):
        with open(makefile, encoding="utf-8", errors="replace") as f:
            m = re.search(r"^abs_top_srcdir\s*=\s*(\S+)", f.read(), re.M)
        if m:
            candidates.append(m.group(1))
    candidates += [build, os.path.join(build, "..")]
    for src in candidates:
        if _has_header(os.path.join(src, "lib", "include")):
            return os.path.abspath(src)
    raise SmddpNotFound(
        f"no lib/include/smddp/smddp.h in the source tree of {build} "
        f"(tried {', '.join(candidates)}); set SMDDP_SOURCE_DIR"
    )


def from_build_dir(build):
    build = os.path.abspath(build)
    libdirs = [os.path.join(build, d) for d in ("lib/.libs", ".libs")]
    libdir = next((d for d in libdirs if _has_lib(d)), None)
    if libdir is None:
        raise SmddpNotFound(
            f"no libsmddp.so in {' or '.join(libdirs)}: run make in {build} first"
        )
    src = _source_dir_of(build)
    return {
        "include_dirs": [os.path.join(src, "lib", "include")],
        "library_dirs": [libdir],
        "libraries": ["smddp"],
        "runtime_library_dirs": [libdir],
        "version_header": os.path.join(src, "lib", "include", "smddp", "smddp.h"),
        "origin": f"build tree {build}",
    }


def from_prefix(prefix):
    prefix = os.path.abspath(prefix)
    incdir = os.path.join(prefix, "include")
    libdir = next(
        (os.path.join(prefix, d) for d in ("lib", "lib64") if _has_lib(os.path.join(prefix, d))),
        None,
    )
    if not _has_header(incdir) or libdir is None:
        raise SmddpNotFound(f"no include/smddp/smddp.h and lib/libsmddp.so under {prefix}")
    return {
        "include_dirs": [incdir],
        "library_dirs": [libdir],
        "libraries": ["smddp"],
        "runtime_library_dirs": [libdir],
        "version_header": os.path.join(incdir, "smddp", "smddp.h"),
        "origin": f"prefix {prefix}",
    }


def _pkg_config(*args):
    out = subprocess.run(
        ["pkg-config", *args, "smddp"], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SmddpNotFound(
            "pkg-config does not know smddp: " + (out.stderr.strip() or "no smddp.pc")
        )
    return out.stdout.strip()


def from_pkg_config():
    if shutil.which("pkg-config") is None:
        raise SmddpNotFound("pkg-config is not installed")
    flags = shlex.split(_pkg_config("--cflags", "--libs"))
    libdir = _pkg_config("--variable=libdir")
    cfg = {
        "include_dirs": [],
        "library_dirs": [],
        "libraries": [],
        "extra_compile_args": [],
        "extra_link_args": [],
        "runtime_library_dirs": [libdir] if libdir else [],
    }
    for flag in flags:
        if flag.startswith("-I"):
            cfg["include_dirs"].append(flag[2:])
        elif flag.startswith("-L"):
            cfg["library_dirs"].append(flag[2:])
        elif flag.startswith("-l"):
            cfg["libraries"].append(flag[2:])
        elif flag.startswith("-Wl,") or flag.startswith("-pthread"):
            cfg["extra_link_args"].append(flag)
        else:
            cfg["extra_compile_args"].append(flag)
    incdir = _pkg_config("--variable=includedir")
    installed = (
        any(_has_header(d) for d in cfg["include_dirs"] + [incdir])
        and libdir
        and _has_lib(libdir)
    )
    if installed:
        header = next(
            os.path.join(d, "smddp", "smddp.h")
            for d in cfg["include_dirs"] + [incdir]
            if _has_header(d)
        )
        cfg["version_header"] = header
        cfg["origin"] = "pkg-config " + " ".join(flags)
        return cfg
    # The .pc file of an uninstalled build names the prefix it will be
    # installed to; the build tree it lies in has the library.
    pcdir = os.path.dirname(os.path.abspath(_pkg_config("--path")))
    try:
        return from_build_dir(pcdir)
    except SmddpNotFound as e:
        raise SmddpNotFound(
            f"pkg-config names {incdir} and {libdir}, which hold no libsmddp, "
            f"and {pcdir} is not a build tree ({e})"
        ) from None


def find_smddp():
    if os.environ.get("SMDDP_BUILD_DIR"):
        return from_build_dir(os.environ["SMDDP_BUILD_DIR"])
    if os.environ.get("SMDDP_PREFIX"):
        return from_prefix(os.environ["SMDDP_PREFIX"])
    return from_pkg_config()


def header_version(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(rf"#define\s+SMDDP_VERSION_{part}\s+(\d+)", text)
        if not m:
            raise SmddpNotFound(f"{path} defines no SMDDP_VERSION_{part}")
        parts.append(m.group(1))
    return ".".join(parts)


def find_cuda():
    """The CUDA toolkit whose headers the CUDA path compiles with, or None."""
    want = os.environ.get("SMDDP_TORCH_CUDA", "")
    if want == "0":
        return None
    why = None
    home = None
    if torch.version.cuda is None:
        why = f"torch {torch.__version__} is not a CUDA build"
    else:
        for cand in (
            os.environ.get("CUDA_HOME"),
            os.environ.get("CUDA_PATH"),
            cpp_extension.CUDA_HOME,
            "/usr/local/cuda",
        ):
            if cand and os.path.exists(os.path.join(cand, "include", "cuda_runtime_api.h")):
                home = cand
                break
        if home is None:
            why = "no CUDA toolkit headers (set CUDA_HOME to the toolkit)"
        else:
            why = cuda_mismatch(home)
            home = None if why else home
    if home is None:
        if want == "1":
            raise SystemExit(f"smddp: SMDDP_TORCH_CUDA=1 but {why}")
        print(f"smddp: building without the CUDA path: {why}", file=sys.stderr)
        return None
    return home


def cuda_mismatch(home):
    """Why the toolkit in home cannot build against this torch, or None.

    The extension links libcudart by soname, which carries the major
    version: another major than torch's would load a second runtime
    beside torch's (torch.utils.cpp_extension refuses it too)."""
    with open(os.path.join(home, "include", "cuda_runtime_api.h"), encoding="utf-8",
              errors="replace") as f:
        m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", f.read())
    if not m:
        return f"{home}/include/cuda_runtime_api.h defines no CUDART_VERSION"
    major = str(int(m.group(1)) // 1000)
    want = torch.version.cuda.split(".")[0]
    if major != want:
        return (
            f"the CUDA toolkit in {home} is CUDA {major}, torch {torch.__version__} was "
            f"built with CUDA {torch.version.cuda} (set CUDA_HOME to a CUDA {want} toolkit)"
        )
    return None


def cuda_flags(home):
    libdir = next(
        (
            os.path.join(home, d)
            for d in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib"))
            if os.path.exists(os.path.join(home, d, "libcudart.so"))
        ),
        None,
    )
    if libdir is None:
        raise SystemExit(f"smddp: no libcudart.so under {home}")
    return {
        "define_macros": [("SMDDP_TORCH_CUDA", "1")],
        "include_dirs": [os.path.join(home, "include")],
        "library_dirs": [libdir],
        # cudart resolves to the copy torch has loaded (same soname).
        "libraries": ["c10_cuda", "torch_cuda", "cudart"],
    }


def extension():
    try:
        smddp = find_smddp()
    except SmddpNotFound as e:
        raise SystemExit(
            f"smddp: cannot find libsmddp: {e}.\n"
            "Install it (make install; pkg-config smddp must work), or point to it with "
            "SMDDP_PREFIX=/prefix, SMDDP_BUILD_DIR=/path/to/build (uninstalled), or "
            "PKG_CONFIG_PATH=/dir/with/smddp.pc."
        )
    print(f"smddp: building against libsmddp from {smddp['origin']}", file=sys.stderr)
    kwargs = {
        "include_dirs": list(smddp["include_dirs"]),
        "library_dirs": list(smddp["library_dirs"]),
        "libraries": list(smddp["libraries"]),
        "runtime_library_dirs": list(smddp["runtime_library_dirs"]),
        "extra_compile_args": ["-Wall", "-fvisibility=hidden", "-Wno-interference-size"]
        + smddp.get("extra_compile_args", []),
        "extra_link_args": smddp.get("extra_link_args", []),
        "define_macros": [],
    }
    home = find_cuda()
    if home:
        for key, value in cuda_flags(home).items():
            kwargs[key] += value
    return cpp_extension.CppExtension("smddp._C", CSRC, **kwargs), header_version(
        smddp["version_header"]
    )


def loaded_libstdcxx():
    """The shared libstdc++ this interpreter loaded with torch, or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) < 6:
                    continue
                path = fields[5].strip()
                if path.endswith(" (deleted)"):
                    path = path[: -len(" (deleted)")]
                if os.path.basename(path).startswith("libstdc++.so") and os.path.exists(path):
                    return path
    except OSError:
        pass
    return None


class BuildExt(cpp_extension.BuildExtension):
    """torch's build_ext, with the shim kept on torch's C++ runtime."""

    def build_extensions(self):
        if sys.platform.startswith("linux"):
            self.share_cxx_runtime()
        super().build_extensions()

    def share_cxx_runtime(self):
        # A compiler with only libstdc++.a links a copy of it into _C.so;
        # the shim's functions then run on that copy (python's LDSHARED has
        # -Bsymbolic-functions) and on torch's libstdc++.so.6 data: a
        # SIGSEGV formatting a number into a message, seen with a GCC in
        # /opt/gcc.  The driver is asked as it links: C++ compiler and
        # flags (--sysroot, -B... change the answer), less env and ccache.
        driver = list(self.compiler.compiler_cxx or self.compiler.linker_so)
        if driver and os.path.basename(driver[0]) == "env":
            driver = driver[1:]
            while driver and "=" in driver[0] and not driver[0].startswith("-"):
                driver = driver[1:]
        while driver and os.path.basename(driver[0]) in ("ccache", "sccache"):
            driver = driver[1:]
        if not driver:
            return
        try:
            out = subprocess.run(
                driver + ["-print-file-name=libstdc++.so"], capture_output=True, text=True,
                check=False,
            )
        except OSError:
            return  # the build itself will say that the compiler is missing
        found = out.stdout.strip()
        if out.returncode != 0 or (os.path.isabs(found) and os.path.exists(found)):
            return
        lib = loaded_libstdcxx()
        if lib is None:
            print(
                f"smddp: warning: {driver[0]} has no shared libstdc++ and torch loaded none; "
                "the shim gets a static copy of libstdc++",
                file=sys.stderr,
            )
            return
        print(
            f"smddp: {driver[0]} has no shared libstdc++ (only the static one); "
            f"linking torch's {lib} instead, so that the process has one C++ runtime",
            file=sys.stderr,
        )
        for ext in self.extensions:
            if lib not in (ext.extra_link_args or []):
                ext.extra_link_args = list(ext.extra_link_args or []) + [lib]


ext, version = extension()

setup(
    version=version,
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt},
)
