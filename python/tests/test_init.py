"""test_init.py - every way a job starts: env:// (smddp-run, torchrun), tcp://,
file://, mpirun, the SageMaker import path, and the group timeout.

Usage:
  test_init.py env                       one rank, under smddp-run or torchrun
  test_init.py spawn tcp|file N          starts N ranks itself, with that init_method
  test_init.py mpi URL                   one rank under mpirun (rank from OMPI_COMM_WORLD_*)
  test_init.py sagemaker                 env://, through smdistributed.dataparallel.torch.torch_smddp
  test_init.py exit                      one rank (smddp-run): issues work, drops it unwaited
                                         and exits without destroy_process_group: exit status 0
  test_init.py exitidle                  one rank (smddp-run): 30 times, an smddp group does a
                                         synchronous all_reduce, then the exit hook runs at
                                         once: it must release the idle group, not abort it
  test_init.py timeout                   2 ranks spawned, timeout=3 s; rank 1 skips a call:
                                         rank 0 raises DistBackendError in seconds
  test_init.py abort coll|recv|shutdown  2 ranks spawned, timeout=120 s; rank 0 queues an
                                         all_reduce (or an irecv) that rank 1 stays away from,
                                         then aborts the group: abort returns in seconds, not
                                         at the timeout, and the work raises (shutdown: the
                                         abort comes while a thread's shutdown() waits for
                                         the all_reduce, and that shutdown ends too)
  test_init.py coalesced                 2 ranks spawned, SMDDP_CHECK_COLL=1; inside
                                         _coalescing_manager(device=cpu) the ranks all_reduce
                                         tensors of different sizes: every rank raises
                                         DistBackendError saying so, 5 times out of 5, and
                                         the group then gives gloo's answer
  test_init.py reinit                    3 ranks spawned, one TCPStore: init, all_reduce,
                                         destroy 3 times (the second time without rank 2),
                                         rank 0 arriving 0.5 s late each time (the group's
                                         store prefix comes back)
  test_init.py settimeout                2 ranks spawned, timeout=120 s, then
                                         dist.set_timeout(3 s), without a warning; rank 1
                                         skips a call: rank 0 raises after about 3 s, not 120
  test_init.py splittimeout              2 ranks spawned, timeout=120 s; a split_group with
                                         timeout=3 s, whose next call rank 1 skips: rank 0
                                         raises after the split's 3 s, not the parent's 120
"""
import datetime
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))


def work(init_method=None, rank=None, size=None, timeout=None):
    import torch
    import torch.distributed as dist

    kw = {}
    if init_method:
        kw.update(init_method=init_method, rank=rank, world_size=size)
    if timeout:
        kw["timeout"] = datetime.timedelta(seconds=timeout)
    dist.init_process_group(backend="smddp", **kw)
    r, n = dist.get_rank(), dist.get_world_size()
    x = torch.full((100000,), float(r + 1))
    dist.all_reduce(x)
    ok = torch.equal(x, torch.full((100000,), n * (n + 1) / 2))
    return dist, r, n, ok


def report(ok, r, what):
    # one write: ranks sharing a pipe (torchrun) must not split each other's lines
    sys.stdout.write(f"{'TORCH-OK' if ok else 'TORCH-BAD'} rank={r} {what}\n")
    sys.stdout.flush()
    return 0 if ok else 1


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def store_wait(store, key, n=1, limit=60):
    """Until key's counter in the store reaches n (another rank's signal), for at most limit s."""
    deadline = time.monotonic() + limit
    while store.add(key, 0) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def skipped_call(dist, store, r, call, check):
    """Rank 1 stays away from call() until rank 0 has given up on it and
    leaves; rank 0 expects a DistBackendError after about 3 s that
    check(message) accepts. Returns (good, what) on rank 0."""
    if r == 1:
        store_wait(store, "gave-up")
        store.add("seen", 1)
        os._exit(0)
    t0 = time.monotonic()
    try:
        call()
        good, what = False, "an all_reduce that rank 1 never joined succeeded"
    except dist.DistBackendError as e:
        took = time.monotonic() - t0
        good = 2.5 < took < 10 and check(str(e))
        what = f"DistBackendError after {took:.1f} s: {str(e)[:300]}"
    store.add("gave-up", 1)
    store_wait(store, "seen")
    return good, what


def spawn(argv_of_rank, n, limit=120):
    procs = [subprocess.Popen([sys.executable, __file__] + argv_of_rank(r)) for r in range(n)]
    t0, rc = time.monotonic(), 0
    for p in procs:
        try:
            rc |= p.wait(timeout=max(1, limit - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            rc = 1
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    return rc


def main():
    mode = sys.argv[1]
    if mode == "env":
        import smddp.torch  # noqa: F401
        dist, r, n, ok = work()
        ok = ok and os.environ.get("MASTER_PORT") is not None
        dist.destroy_process_group()
        return report(ok, r, f"env:// of {n}")
    if mode == "sagemaker":
        import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401
        dist, r, n, ok = work()
        dist.destroy_process_group()
        return report(ok, r, f"SageMaker import path, {n} ranks")
    if mode == "spawn":
        kind, n = sys.argv[2], int(sys.argv[3])
        if kind == "tcp":
            url = f"tcp://127.0.0.1:{free_port()}"
        else:
            fd, path = tempfile.mkstemp(prefix="smddp-init-")
            os.close(fd)
            os.unlink(path)  # torch makes it
            url = f"file://{path}"
        rc = spawn(lambda r: ["child", url, str(r), str(n)], n)
        if kind == "file" and os.path.exists(url[7:]):
            os.unlink(url[7:])
        return rc
    if mode == "child":
        import smddp.torch  # noqa: F401
        url, r, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        dist, r, n, ok = work(url, r, n)
        dist.destroy_process_group()
        return report(ok, r, f"{url.split(':')[0]}:// of {n}")
    if mode == "mpi":
        import smddp.torch  # noqa: F401
        r = int(os.environ["OMPI_COMM_WORLD_RANK"])
        n = int(os.environ["OMPI_COMM_WORLD_SIZE"])
        dist, r, n, ok = work(sys.argv[2], r, n)
        dist.destroy_process_group()
        return report(ok, r, f"mpirun, {n} ranks")
    if mode == "exit":
        import smddp.torch  # noqa: F401
        import torch
        dist, r, n, ok = work()
        # The worker holds the last references of these tensors when the
        # interpreter exits: the backend must stop it first (its atexit hook).
        for _ in range(200):
            dist.all_reduce(torch.ones(4096), async_op=True)
        # No rank leaves before every rank has issued its calls: a rank that
        # left with work queued aborts the group, and a call issued after
        # that raises at once (as it should).  The store, not the group.
        store = dist.distributed_c10d._get_default_store()
        store.add("exit-issued", 1)
        store_wait(store, "exit-issued", n)
        return report(ok, r, f"exit without destroy_process_group, {n} ranks")
    if mode == "exitidle":
        import torch
        import torch.distributed as dist
        import smddp.torch  # noqa: F401
        from smddp import _C
        # The world is gloo: the hook stops every smddp group there is.
        dist.init_process_group(backend="gloo")
        r, n = dist.get_rank(), dist.get_world_size()
        bad = []
        for i in range(30):
            g = dist.new_group(backend="smddp")
            x = torch.ones(16)
            dist.all_reduce(x, group=g)  # returns once the work completed
            _C._stop_all_at_exit()  # what the interpreter's exit runs
            try:
                dist.all_reduce(x, group=g)
                bad.append(f"try {i}: a call after the exit hook succeeded")
            except RuntimeError as e:
                # "shut down", not "failed earlier ... still queued"
                if "still queued" in str(e) or "failed" in str(e):
                    bad.append(f"try {i}: {str(e)[:240]}")
            dist.destroy_process_group(g)
        ok = not bad
        dist.destroy_process_group()
        return report(ok, r, "the exit hook releases idle groups" if ok else
                      f"{len(bad)} of 30 idle groups aborted at exit, first: {bad[0]}")
    if mode == "timeout":
        url = f"tcp://127.0.0.1:{free_port()}"
        return spawn(lambda r: ["timeout-child", url, str(r)], 2)
    if mode == "timeout-child":
        import smddp.torch  # noqa: F401
        url, r = sys.argv[2], int(sys.argv[3])
        dist, r, n, ok = work(url, r, 2, timeout=3)
        import torch
        if r == 1:
            time.sleep(12)  # skips the next call; leaves after rank 0 gave up
            os._exit(0)
        t0 = time.monotonic()
        try:
            dist.all_reduce(torch.ones(4))
            return report(False, r, "an all_reduce that rank 1 never joined succeeded")
        except dist.DistBackendError as e:
            took = time.monotonic() - t0
            good = 2.5 < took < 10 and re.search(r"ranks?(\(s\))? 1\b", str(e)) is not None
            return report(good, r, f"DistBackendError after {took:.1f} s: {str(e)[:300]}")
    if mode == "abort":
        url = f"tcp://127.0.0.1:{free_port()}"
        return spawn(lambda r: ["abort-child", url, str(r), sys.argv[2]], 2)
    if mode == "abort-child":
        import smddp.torch  # noqa: F401
        url, r, kind = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        dist, r, n, ok = work(url, r, 2, timeout=120)
        import torch
        c10d = dist.distributed_c10d
        if not hasattr(c10d, "_abort_process_group"):
            sys.stdout.write(f"TORCH-SKIP rank={r} torch {torch.__version__} has no "
                             "_abort_process_group\n")
            return 0
        store = c10d._get_default_store()
        if r == 1:
            # stays away from rank 0's call until rank 0 has aborted
            store_wait(store, "aborted")
            store.add("seen", 1)  # rank 0 serves the store: it waits for this
            os._exit(0)
        if kind == "recv":
            w = dist.irecv(torch.zeros(4), src=1)
        else:
            w = dist.all_reduce(torch.ones(4), async_op=True)
        closer = None
        if kind == "shutdown":
            import threading
            closer = threading.Thread(target=c10d._get_default_group().shutdown)
            closer.start()
        time.sleep(0.5)  # the worker is inside the library call by now, or soon
        t0 = time.monotonic()
        if closer:
            c10d._get_default_group().abort()
            closer.join(10)
            if closer.is_alive():
                return report(False, r, "shutdown() still waits 10 s after abort()")
        else:
            c10d._abort_process_group()
        took = time.monotonic() - t0
        store.add("aborted", 1)
        store_wait(store, "seen")
        try:
            w.wait()
            raised = "no exception"
        except Exception as e:  # noqa: BLE001
            raised = f"{type(e).__name__}: {str(e).splitlines()[0][:240]}"
        good = took < 10 and raised != "no exception"
        return report(good, r, f"abort of a group inside {kind} returned after {took:.2f} s; "
                      f"the work: {raised}")
    if mode == "coalesced":
        url = f"tcp://127.0.0.1:{free_port()}"
        return spawn(lambda r: ["coalesced-child", url, str(r)], 2)
    if mode == "coalesced-child":
        # Read by libsmddp when the first communicator is made.
        os.environ["SMDDP_CHECK_COLL"] = "1"
        import smddp.torch  # noqa: F401
        url, r = sys.argv[2], int(sys.argv[3])
        dist, r, n, ok = work(url, r, 2, timeout=60)
        import torch
        gloo = dist.new_group(backend="gloo")
        cpu = torch.device("cpu")
        bad = []
        for i in range(5):
            t = torch.ones(4 + r)  # a size per rank: the library refuses the call
            try:
                with dist._coalescing_manager(device=cpu):
                    dist.all_reduce(t)
                bad.append(f"try {i}: no error, t={t.tolist()}")
            except dist.DistBackendError as e:
                if "disagree" not in str(e):
                    bad.append(f"try {i}: {str(e)[:200]}")
        # EMISMATCH leaves the group usable: the same window, agreed, is right
        xs, want = [torch.full((k,), float(r + 1)) for k in (3, 5)], []
        for x in xs:
            want.append(x.clone())
            dist.all_reduce(want[-1], group=gloo)
        with dist._coalescing_manager(device=cpu):
            for x in xs:
                dist.all_reduce(x)
        if not all(torch.equal(x, w) for x, w in zip(xs, want)):
            bad.append(f"the agreed window after them: {[x.tolist() for x in xs]}")
        dist.destroy_process_group()
        return report(ok and not bad, r, "an error inside the coalescing manager: " +
                      ("raised every time" if not bad else "; ".join(bad)))
    if mode == "reinit":
        port = free_port()
        return spawn(lambda r: ["reinit-child", str(port), str(r)], 3)
    if mode == "reinit-child":
        import torch
        import torch.distributed as dist
        import smddp.torch  # noqa: F401
        port, r = int(sys.argv[2]), int(sys.argv[3])
        store = dist.TCPStore("127.0.0.1", port, 3, is_master=r == 0,
                              timeout=datetime.timedelta(seconds=60))
        bad = []
        for i, n in enumerate((3, 2, 3)):
            if r >= n:
                store_wait(store, f"reinit-{i}-done", n)
                continue
            if r == 0:
                time.sleep(0.5)  # the others look for the id first
            t0 = time.monotonic()
            try:
                dist.init_process_group(backend="smddp", store=store, rank=r, world_size=n,
                                        timeout=datetime.timedelta(seconds=10))
                x = torch.full((1000,), float(r + 1))
                dist.all_reduce(x)
                store.add(f"reinit-{i}-done", 1)
                if not torch.equal(x, torch.full((1000,), n * (n + 1) / 2)):
                    bad.append(f"group {i}: all_reduce gave {x[:3].tolist()}")
                dist.destroy_process_group()
            except Exception as e:  # noqa: BLE001
                bad.append(f"group {i}: {type(e).__name__} after {time.monotonic() - t0:.1f} s: "
                           f"{str(e).splitlines()[0][:200]}")
                break
        # The store lives in rank 0: it goes last, once every rank is done with it.
        store.add("reinit-finished", 1)
        if r == 0:
            store_wait(store, "reinit-finished", 3)
        return report(not bad, r, "groups of 3, 2, 3 ranks one after the other on one store: " +
                      ("OK" if not bad else bad[0]))
    if mode == "settimeout":
        url = f"tcp://127.0.0.1:{free_port()}"
        return spawn(lambda r: ["settimeout-child", url, str(r)], 2)
    if mode == "settimeout-child":
        import warnings
        import smddp.torch  # noqa: F401
        url, r = sys.argv[2], int(sys.argv[3])
        dist, r, n, ok = work(url, r, 2, timeout=120)
        import torch
        if not hasattr(dist, "set_timeout"):
            sys.stdout.write(f"TORCH-SKIP rank={r} torch {torch.__version__} has no set_timeout\n")
            return 0
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            dist.set_timeout(datetime.timedelta(seconds=3))
        ignored = [str(w.message) for w in said if "timeout" in str(w.message)]
        store = dist.distributed_c10d._get_default_store()
        good, what = skipped_call(dist, store, r, lambda: dist.all_reduce(torch.ones(4)),
                                  lambda msg: "3000 ms" in msg)
        if ignored:
            good, what = False, f"set_timeout warned: {ignored[0][:200]}; " + what
        return report(good, r, "set_timeout(3 s): " + what)
    if mode == "splittimeout":
        url = f"tcp://127.0.0.1:{free_port()}"
        return spawn(lambda r: ["splittimeout-child", url, str(r)], 2)
    if mode == "splittimeout-child":
        import smddp.torch  # noqa: F401
        url, r = sys.argv[2], int(sys.argv[3])
        dist, r, n, ok = work(url, r, 2, timeout=120)
        import torch
        if not hasattr(dist, "split_group"):
            sys.stdout.write(f"TORCH-SKIP rank={r} torch {torch.__version__} has no split_group\n")
            return 0
        store = dist.distributed_c10d._get_default_store()
        sub = dist.split_group(split_ranks=[[0, 1]], timeout=datetime.timedelta(seconds=3))
        x = torch.ones(4)
        dist.all_reduce(x, group=sub)
        good, what = skipped_call(dist, store, r, lambda: dist.all_reduce(x, group=sub),
                                  lambda msg: re.search(r"ranks?(\(s\))? 1\b", msg) is not None)
        return report(good, r, "split_group(timeout=3 s): " + what)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
