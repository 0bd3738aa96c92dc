#!/bin/bash
# scripts/test.sh - build in ./build and run the whole test suite (make distcheck, which runs make check on the tarball).
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && ! pkg-config --exists libcjson 2>/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(cat .ci/packages)
fi
[ -x configure ] || autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure
make -j"$(nproc)"
# distcheck builds the release tarball, builds it again out of tree with a
# read-only source, and runs every test there: one run of the suite.
make -j"$(nproc)" distcheck
