#!/bin/sh
# fakehost.sh PROGRAM ARGS... - run PROGRAM as if on host "fake-hN", N = RANK / CONFORMANCE_PER_HOST
#
# libsmddp groups ranks by SMDDP_HOSTID when it is set (a test-only override
# of the host identity), so ranks on this one machine take the paths between
# hosts: libfabric (tcp on loopback) between "hosts", shared memory inside.
export SMDDP_HOSTID="fake-h$((RANK / ${CONFORMANCE_PER_HOST:-1}))"
exec "$@"
