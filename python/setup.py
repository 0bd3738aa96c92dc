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
  the source tree       when pkg-config finds none: the libsmddp source tree
                        that python/ lies in (a git checkout or the release
                        tarball; SMDDP_SOURCE_DIR names another) is built in
                        the build folder (autoreconf when it has no configure
                        script, configure with a prefix there, make) and
                        bundled: libsmddp.so.N and smddp-run go into the
                        package beside _C, which finds its copy through the
                        rpath $ORIGIN; `smddp-run` becomes a console script.

SMDDP_BUNDLE=1 builds and bundles even where pkg-config finds a libsmddp,
SMDDP_BUNDLE=0 never does (no installed libsmddp is then an error).  The
bundled build passes SMDDP_CONFIGURE_ARGS on to configure (e.g.
"--without-libfabric"), runs MAX_JOBS make jobs (default: every CPU) and
is built with the CUDA device path (--with-cuda) when the shim's is (below)
and that toolkit has nvcc; NVCC_GENCODE picks the GPU architectures (see
configure --help).  The build log says which libsmddp was used.

Otherwise the library's directory goes into the extension's rpath, so
nothing needs LD_LIBRARY_PATH.  The shim shares torch's C++ runtime: where the compiler
has only a static libstdc++ (a GCC built with --disable-shared, say), the
libstdc++.so.6 that torch loaded is linked instead, since a second copy of
libstdc++ in the process crashes in its locale code.

SMDDP_UNITY_BUILD=1 compiles the shim as one translation unit that
includes every source file, where each otherwise is one: torch's headers
are then parsed once instead of once a file, about a third of the CPU
time. The test suite builds it so; users get the files one by one.

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
    "smddp/csrc/WorkSMDDP.cpp",
    "smddp/csrc/WorkQueue.cpp",
    "smddp/csrc/WorkQueueLife.cpp",
    "smddp/csrc/WorkDeviceCheck.cpp",
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
        why = out.stderr.strip().splitlines()
        raise SmddpNotFound(
            "pkg-config finds no smddp.pc (PKG_CONFIG_PATH names none)"
            if not why or "not found" in why[0]
            else f"pkg-config smddp: {why[-1]}"
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
        cfg["origin"] = f"the installed {libdir} that pkg-config found ({' '.join(flags)})"
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


# What building libsmddp from its source tree needs (Debian names): these,
# and the autotools where the tree has no configure script (a git checkout).
BUILD_PACKAGES = "build-essential pkg-config libcjson-dev"
AUTOTOOLS_PACKAGES = "autoconf automake libtool"


def source_tree():
    """The libsmddp source tree to build and bundle: the one python/ lies in."""
    src = os.path.abspath(os.environ.get("SMDDP_SOURCE_DIR") or os.path.join(HERE, ".."))
    if not (
        os.path.exists(os.path.join(src, "configure.ac"))
        and _has_header(os.path.join(src, "lib", "include"))
    ):
        raise SmddpNotFound(
            f"{src} is no libsmddp source tree to build one from (no configure.ac and "
            "lib/include/smddp/smddp.h: python/ was copied out of it; set SMDDP_SOURCE_DIR)"
        )
    return src


def bundled(src):
    header = os.path.join(src, "lib", "include", "smddp", "smddp.h")
    return {
        "include_dirs": [os.path.join(src, "lib", "include")],
        "library_dirs": [],  # the prefix of the build, once built (BuildExt)
        "libraries": ["smddp"],
        # _C finds the copy bundled beside it, wherever the package goes.
        "runtime_library_dirs": ["$ORIGIN"],
        "version_header": header,
        "origin": f"the source tree {src}, built here and bundled into the package",
        "bundle_source": src,
    }


def find_smddp():
    bundle = os.environ.get("SMDDP_BUNDLE", "")
    if bundle not in ("", "0", "1"):
        raise SystemExit(
            f"smddp: SMDDP_BUNDLE={bundle}: use 1 (build libsmddp from its source tree and "
            "bundle it) or 0 (use an installed libsmddp only)"
        )
    for var in ("SMDDP_BUILD_DIR", "SMDDP_PREFIX"):
        if os.environ.get(var) and bundle == "1":
            raise SystemExit(f"smddp: SMDDP_BUNDLE=1 and {var} both given: unset one of them")
    if os.environ.get("SMDDP_BUILD_DIR"):
        return from_build_dir(os.environ["SMDDP_BUILD_DIR"])
    if os.environ.get("SMDDP_PREFIX"):
        return from_prefix(os.environ["SMDDP_PREFIX"])
    if bundle == "1":
        return bundled(source_tree())
    try:
        return from_pkg_config()
    except SmddpNotFound as e:
        if bundle == "0":
            raise SmddpNotFound(f"{e} (and SMDDP_BUNDLE=0 builds none)") from None
        try:
            src = source_tree()
        except SmddpNotFound as e2:
            raise SmddpNotFound(f"{e}; and {e2}") from None
        print(f"smddp: no installed libsmddp ({e})", file=sys.stderr)
        return bundled(src)


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


def sources():
    """CSRC, or with SMDDP_UNITY_BUILD=1 one generated file that includes them all."""
    if os.environ.get("SMDDP_UNITY_BUILD") != "1":
        return CSRC
    os.makedirs(os.path.join(HERE, "build"), exist_ok=True)
    unit = os.path.join(HERE, "build", "smddp-unity.cpp")
    text = "".join(f'#include "{os.path.join(HERE, f)}"\n' for f in CSRC)
    if not os.path.exists(unit) or open(unit, encoding="utf-8").read() != text:
        with open(unit, "w", encoding="utf-8") as f:
            f.write(text)
    print(f"smddp: one translation unit (SMDDP_UNITY_BUILD=1): {unit}", file=sys.stderr)
    return [os.path.relpath(unit, HERE)]


def extension():
    try:
        smddp = find_smddp()
    except SmddpNotFound as e:
        raise SystemExit(
            f"smddp: cannot find libsmddp: {e}.\n"
            "Build from a libsmddp source tree (a git checkout or the release tarball: "
            "pip install ./python there builds libsmddp too), or install it (make install; "
            "pkg-config smddp must work), or point to it with SMDDP_PREFIX=/prefix, "
            "SMDDP_BUILD_DIR=/path/to/build (uninstalled), or "
            "PKG_CONFIG_PATH=/dir/with/smddp.pc."
        )
    if "bundle_source" in smddp:
        again = "SMDDP_BUNDLE=0 uses an installed one only"
    else:
        again = "SMDDP_BUNDLE=1 builds and bundles the one of this source tree instead"
    print(f"smddp: building against libsmddp from {smddp['origin']} ({again})",
          file=sys.stderr)
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
    if "bundle_source" in smddp:
        smddp["bundle_cuda"] = bundle_cuda(home)
    return smddp, cpp_extension.CppExtension("smddp._C", sources(), **kwargs), header_version(
        smddp["version_header"]
    )


def bundle_cuda(home):
    """The toolkit the bundled libsmddp is configured --with-cuda=, or None.

    The one the shim's CUDA path was decided for (find_cuda: torch is a
    CUDA build of that major), when it has what configure needs."""
    if home is None:
        print("smddp: the bundled libsmddp is built without the CUDA device path, "
              "as the shim is", file=sys.stderr)
        return None
    missing = [
        p for p in ("bin/nvcc", "lib64/libcudart_static.a")
        if not os.path.exists(os.path.join(home, p))
    ]
    if missing:
        why = f"the CUDA toolkit in {home} has no {' and no '.join(missing)}"
        if os.environ.get("SMDDP_TORCH_CUDA") == "1":
            raise SystemExit(f"smddp: SMDDP_TORCH_CUDA=1 but {why} to build libsmddp's "
                             "device path with (set CUDA_HOME to a full toolkit)")
        print(f"smddp: the bundled libsmddp is built without the CUDA device path: {why} "
              "(CUDA tensors then fail with an error that says so)", file=sys.stderr)
        return None
    print(f"smddp: the bundled libsmddp is built with the CUDA device path of {home}",
          file=sys.stderr)
    return home


def _flush():
    sys.stdout.flush()
    sys.stderr.flush()


def _step(cmd, cwd, what, hint):
    """Run one step of the libsmddp build, its output into the build log."""
    print("smddp: " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    _flush()
    try:
        rc = subprocess.run(cmd, cwd=cwd, check=False).returncode
    except OSError as e:
        raise SystemExit(f"smddp: cannot run {cmd[0]} ({e.strerror}). {hint}") from None
    if rc != 0:
        raise SystemExit(f"smddp: {what} failed (exit {rc}, output above). {hint}")


def _configure_error(build):
    """configure's own last error (config.log: "configure:LINE: error: ...")."""
    try:
        with open(os.path.join(build, "config.log"), encoding="utf-8",
                  errors="replace") as f:
            errors = [m.group(1) for m in map(re.compile(r"configure:\d*:? error: (.*)").match, f)
                      if m]
    except OSError:
        return ""
    return f"configure: error: {errors[-1].strip()} " if errors else ""


def build_libsmddp(src, root, cuda_home):
    """Configures, makes and installs libsmddp from src into a prefix under root."""
    hint = (
        f"Building libsmddp needs the Debian packages {BUILD_PACKAGES} (and "
        f"{AUTOTOOLS_PACKAGES} in a git checkout): apt-get install them; or install "
        "libsmddp first (README.md) and build with SMDDP_BUNDLE=0."
    )
    if shutil.which("make") is None:
        raise SystemExit(f"smddp: make is not installed. {hint}")
    if not os.path.exists(os.path.join(src, "configure")):
        if shutil.which("autoreconf") is None:
            raise SystemExit(
                f"smddp: {src} has no configure script (a git checkout; the release "
                "tarball of make dist has one) and autoreconf is not installed: apt-get "
                f"install {AUTOTOOLS_PACKAGES} pkg-config, then build again"
            )
        _step(["autoreconf", "-fi"], src, f"autoreconf -fi in {src}", hint)
    if os.path.exists(os.path.join(src, "config.status")):
        raise SystemExit(
            f"smddp: {src} is configured in place (it has config.status), which rules out "
            "a second, out-of-tree build of it: run make there and build with "
            f"SMDDP_BUILD_DIR={src}, or run make distclean there first"
        )
    build = os.path.join(root, "libsmddp")
    prefix = os.path.join(build, "prefix")
    os.makedirs(build, exist_ok=True)
    args = [os.path.join(src, "configure"), f"--prefix={prefix}", "--disable-static"]
    if cuda_home:
        args.append(f"--with-cuda={cuda_home}")
    args += shlex.split(os.environ.get("SMDDP_CONFIGURE_ARGS", ""))
    # Configure again only when something configure reads has changed.
    stamp = os.path.join(build, "smddp-configured-with")
    want = "\n".join(args + ["NVCC_GENCODE=" + os.environ.get("NVCC_GENCODE", "")]) + "\n"
    have = None
    if os.path.exists(stamp) and os.path.exists(os.path.join(build, "Makefile")):
        with open(stamp, encoding="utf-8") as f:
            have = f.read()
    if have != want:
        print("smddp: configuring libsmddp", file=sys.stderr)
        _flush()
        rc = subprocess.run(args, cwd=build, check=False).returncode
        if rc != 0:
            raise SystemExit(
                f"smddp: configuring libsmddp in {build} failed: "
                f"{_configure_error(build)}{hint} (details: {build}/config.log)"
            )
        with open(stamp, "w", encoding="utf-8") as f:
            f.write(want)
    jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 1)
    # The library and the launcher only: the other tools and the tests are
    # for make check and make install.
    _step(["make", f"-j{jobs}", "lib/libsmddp.la", "cmd/smddp-run"], build,
          "make of libsmddp", hint)
    _step(["make", "install-libLTLIBRARIES", "install-binPROGRAMS",
           "bin_PROGRAMS=cmd/smddp-run"], build, "make install of libsmddp", hint)
    return prefix


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
        prefix = None
        if "bundle_source" in SMDDP:
            prefix = build_libsmddp(
                SMDDP["bundle_source"], os.path.abspath(self.build_temp), SMDDP["bundle_cuda"]
            )
            for ext in self.extensions:
                ext.library_dirs = [os.path.join(prefix, "lib")] + list(ext.library_dirs)
        super().build_extensions()
        if prefix:
            self.bundle(prefix)

    def bundle(self, prefix):
        """libsmddp.so.N (its soname, the name _C asks for) and smddp-run into
        the package, beside _C: into the wheel, or into the source tree with
        --inplace."""
        pkg = os.path.dirname(self.get_ext_fullpath("smddp._C"))
        libdir = os.path.join(prefix, "lib")
        sonames = [n for n in os.listdir(libdir) if re.fullmatch(r"libsmddp\.so\.\d+", n)]
        if len(sonames) != 1:
            raise SystemExit(f"smddp: expected one libsmddp.so.N in {libdir}, found {sonames}")
        for old in os.listdir(pkg):
            if re.fullmatch(r"libsmddp\.so\.\d+", old):
                os.remove(os.path.join(pkg, old))
        shutil.copy2(os.path.join(libdir, sonames[0]), os.path.join(pkg, sonames[0]))
        os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
        shutil.copy2(os.path.join(prefix, "bin", "smddp-run"),
                     os.path.join(pkg, "bin", "smddp-run"))
        print(f"smddp: bundled {sonames[0]} and bin/smddp-run into {pkg}", file=sys.stderr)

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


SMDDP, ext, version = extension()

setup(
    version=version,
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt},
    entry_points={
        # torch 2.15 looks a backend name it does not know up in this group
        # and calls the function, which registers the backend:
        # init_process_group(backend="smddp") then needs no import.
        "torch.distributed.backends": ["smddp = smddp.torch:register_backend"],
        # torch >= 2.5 calls every function of this group (meant for device
        # backends) at `import torch`; this one registers the backend where
        # torch reads no torch.distributed.backends group (2.11), and does
        # nothing otherwise.
        "torch.backends": ["smddp = smddp._autoload:autoload"],
        # smddp-run comes with a bundled libsmddp; an installed one has its own.
        "console_scripts": ["smddp-run = smddp._run:main"] if "bundle_source" in SMDDP else [],
    },
)
