#!/bin/bash
# scripts/test.sh - build in ./build and run the whole test suite (make distcheck, which runs make check on the tarball).
set -eu
cd "$(dirname "$0")/.."
./scripts/build.sh
cd build
# distcheck builds the release tarball, builds it again out of tree with a
# read-only source, and runs every test there: one run of the suite.
make -j"$(nproc)" distcheck
