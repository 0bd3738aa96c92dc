"""The smddp-run console script: runs the launcher bundled in this package.

pip install ./python builds smddp-run with the libsmddp it bundles and puts
it in smddp/bin/; this script (on PATH, where pip puts console scripts)
hands over to it, arguments, environment and exit status unchanged.
"""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "smddp-run")
    if not os.access(exe, os.X_OK):
        sys.stderr.write(
            f"smddp-run: {exe} is missing: this smddp package was built against an "
            "installed libsmddp, whose smddp-run comes with it (make install); "
            "reinstall the package to bundle one (SMDDP_BUNDLE=1)\n"
        )
        return 1
    os.execv(exe, [exe] + sys.argv[1:])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
