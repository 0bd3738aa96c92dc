"""test_collectives.py - every collective of the backend x dtype x op against gloo.

Run one process per rank (env:// init: smddp-run -n N, or torchrun).
DEVICE=cuda puts the smddp side's tensors on the GPU (local rank modulo the
GPUs); the reference stays on the CPU.  The
world is an smddp group; a gloo group over the same ranks computes the
reference from the same inputs.  Values are small integers, so sums come
out exact in any order and results compare bit for bit.
"""
import os
import threading
import time
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist

import smddp.torch
from common import check, expect_error, finish, same

dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
check(dist.get_backend() == "smddp", f"default backend is {dist.get_backend()}")
check(dist.get_backend(gloo) == "gloo", "the gloo group is gloo")

DEVICE = os.environ.get("DEVICE", "cpu")
if DEVICE == "cuda":
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", R)) % torch.cuda.device_count())
dev = torch.device(DEVICE)


def D(t):
    """The smddp side's copy of a tensor, on the device under test."""
    return t.clone().to(dev) if DEVICE != "cuda" else t.to(dev)


def H(t):
    return t.cpu()


Op = dist.ReduceOp
DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64, torch.bool, torch.complex64, torch.complex128]
COUNTS = [0, 1, 13, 4099, 65537]


def data(count, dtype, salt, prod=False):
    g = torch.Generator().manual_seed(1000 * salt + 7 * R + count)
    if dtype == torch.bool:
        return torch.randint(0, 2, (count,), generator=g).bool()
    lo, hi = (-1, 3) if prod else (-20, 21)
    if dtype == torch.uint8:
        lo, hi = (1, 3) if prod else (0, 60)
    x = torch.randint(lo, hi, (count,), generator=g)
    if dtype.is_complex:
        y = torch.randint(lo, hi, (count,), generator=torch.Generator().manual_seed(salt + R))
        return torch.complex(x.float(), y.float()).to(dtype)
    return x.to(dtype)


def ops_for(dtype):
    if dtype == torch.bool:
        return [Op.SUM, Op.PRODUCT, Op.MIN, Op.MAX]
    if dtype.is_complex:
        return [Op.SUM, Op.AVG]
    return [Op.SUM, Op.PRODUCT, Op.MIN, Op.MAX, Op.AVG]


def reference_allreduce(x, op):
    """gloo's answer.  AVG (which gloo has only from torch 2.5, and never on
    integers) is gloo's sum divided by the number of ranks: truncated for
    integers, rounded once for 16-bit floats (libsmddp divides in float)."""
    y = x.clone()
    if op != Op.AVG:
        dist.all_reduce(y, op=op, group=gloo)
        return y
    dist.all_reduce(y, op=Op.SUM, group=gloo)
    if not (x.is_floating_point() or x.is_complex()):
        return torch.div(y, N, rounding_mode="trunc").to(x.dtype)
    if x.dtype in (torch.float16, torch.bfloat16):
        return (y.double() / N).to(x.dtype)
    if x.is_complex():  # each part divided, as libsmddp sees them (view_as_real)
        return torch.view_as_complex(torch.view_as_real(y) / N)
    return y / N


def reference_reduce_scatter(big, count):
    """This rank's block of gloo's sum (gloo before torch 2.5 has no reduce_scatter)."""
    y = big.clone()
    dist.all_reduce(y, group=gloo)
    return y[R * count:(R + 1) * count].clone()


salt = 0
for dtype in DTYPES:
    for op in ops_for(dtype):
        for count in COUNTS:
            salt += 1
            x = data(count, dtype, salt, prod=op == Op.PRODUCT)
            want = reference_allreduce(x, op)
            got = D(x)
            work = dist.all_reduce(got, op=op, async_op=True)
            work.wait()
            check(same(H(got), want), f"all_reduce {dtype} {op} count {count}")
            # out of place through a non-contiguous view: copied back
            if count > 1 and dtype != torch.bool and not dtype.is_complex:
                m = data(2 * count, dtype, salt, prod=op == Op.PRODUCT).view(count, 2)
                w = reference_allreduce(m.t().contiguous(), op)
                v = D(m).t()  # non-contiguous
                dist.all_reduce(v, op=op)
                check(same(H(v).contiguous(), w), f"all_reduce non-contiguous {dtype} {op} {count}")

# PREMUL_SUM: multiply by the factor, then sum (gloo has none: reference by hand)
for dtype in (torch.float32, torch.float64, torch.bfloat16):
    x = data(4099, dtype, 99)
    want = x.clone() * 2
    dist.all_reduce(want, group=gloo)
    got = D(x)
    dist.all_reduce(got, op=dist._make_nccl_premul_sum(2.0))
    check(same(H(got), want), f"PREMUL_SUM {dtype}")
    # the factor as a one-element tensor on the device (kept alive for
    # the side stream on CUDA)
    got = D(x)
    dist.all_reduce(got, op=dist._make_nccl_premul_sum(torch.tensor(2.0, dtype=dtype, device=dev)))
    check(same(H(got), want), f"PREMUL_SUM by a tensor {dtype}")
    want_rs = reference_reduce_scatter(data(N * 5, dtype, 98) * 2, 5)
    got_rs = torch.empty(5, dtype=dtype, device=dev)
    dist.reduce_scatter_tensor(got_rs, D(data(N * 5, dtype, 98)),
                               op=dist._make_nccl_premul_sum(torch.tensor(2.0, dtype=dtype, device=dev)))
    check(same(H(got_rs), want_rs), f"reduce_scatter_tensor PREMUL_SUM by a tensor {dtype}")

# all_reduce_coalesced
ts = [data(c, torch.float32, 7) for c in (5, 0, 4099)]
want = [t.clone() for t in ts]
dist.all_reduce_coalesced(want, group=gloo)
ts = [D(t) for t in ts]
dist.all_reduce_coalesced(ts)
check(all(same(H(a), b) for a, b in zip(ts, want)), "all_reduce_coalesced")

for dtype in (torch.int8, torch.int64, torch.float16, torch.bfloat16, torch.float64, torch.bool):
    for count in (0, 7, 4099):
        salt += 1
        for root in range(N):
            x = data(count, dtype, salt)
            want, got = x.clone(), D(x)
            dist.broadcast(want, root, group=gloo)
            dist.broadcast(got, root)
            check(same(H(got), want), f"broadcast {dtype} count {count} root {root}")
            for op in ops_for(dtype)[:4]:
                xo = data(count, dtype, salt, prod=True) if op == Op.PRODUCT else x
                want, got = xo.clone(), D(xo)
                if dtype == torch.bool:
                    break
                dist.reduce(want, root, op=op, group=gloo)
                dist.reduce(got, root, op=op)
                # only the root's result is defined
                if R == root:
                    check(same(H(got), want), f"reduce {dtype} {op} count {count} root {root}")
        x = data(count, dtype, salt)
        want = [torch.empty_like(x) for _ in range(N)]
        got = [torch.empty_like(x, device=dev) for _ in range(N)]
        dist.all_gather(want, x, group=gloo)
        dist.all_gather(got, D(x))
        check(all(same(H(a), b) for a, b in zip(got, want)), f"all_gather {dtype} {count}")
        want_t = torch.empty(N * count, dtype=dtype)
        got_t = torch.empty(N * count, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(want_t, x, group=gloo)
        dist.all_gather_into_tensor(got_t, D(x))
        check(same(H(got_t), want_t), f"all_gather_into_tensor {dtype} {count}")
        if dtype != torch.bool:
            big = data(N * count, dtype, salt)
            want_rs, got_rs = torch.empty(count, dtype=dtype), torch.empty(count, dtype=dtype, device=dev)
            want_rs = reference_reduce_scatter(big, count)
            dist.reduce_scatter_tensor(got_rs, D(big))
            check(same(H(got_rs), want_rs), f"reduce_scatter_tensor {dtype} {count}")
            parts = list(big.chunk(N)) if count else [big.new_empty(0) for _ in range(N)]
            want_rs, got_rs = torch.empty(count, dtype=dtype), torch.empty(count, dtype=dtype, device=dev)
            want_rs = reference_reduce_scatter(big, count)
            dist.reduce_scatter(got_rs, [D(p) for p in parts])
            check(same(H(got_rs), want_rs), f"reduce_scatter list {dtype} {count}")
            a2a_in = data(N * count, dtype, salt + 1)
            want_a, got_a = torch.empty_like(a2a_in), torch.empty_like(a2a_in, device=dev)
            dist.all_to_all_single(want_a, a2a_in, group=gloo)
            dist.all_to_all_single(got_a, D(a2a_in))
            check(same(H(got_a), want_a), f"all_to_all_single {dtype} {count}")
            if count:
                eq = [count] * N
                got_a = torch.empty_like(a2a_in, device=dev)
                dist.all_to_all_single(got_a, D(a2a_in), eq, eq)
                check(same(H(got_a), want_a), f"all_to_all_single equal splits {dtype} {count}")

# The calls that only move data take the dtypes libsmddp cannot reduce
# (moved as bytes).  gloo has no int16 or float8: its reference moves
# the same bytes as uint8.
MOVED = [torch.int16, torch.bool]
for name in ("uint16", "float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, name):
        MOVED.append(getattr(torch, name))


def moved_data(count, dtype, salt):
    g = torch.Generator().manual_seed(1000 * salt + 7 * R + count)
    # every bit pattern, the float8 NaNs included (compared bit for bit)
    return torch.randint(0, 256, (count * dtype.itemsize,), generator=g,
                         dtype=torch.uint8).view(dtype)


def as_bytes(t):
    return t.view(torch.uint8)


for dtype in MOVED:
    for count in (0, 7, 4099):
        salt += 1
        x = moved_data(count, dtype, salt)
        for root in range(N):
            want, got = x.clone(), D(x)
            dist.broadcast(as_bytes(want), root, group=gloo)
            dist.broadcast(got, root)
            check(same(H(got), want), f"broadcast {dtype} count {count} root {root}")
        want = [torch.empty_like(x) for _ in range(N)]
        got = [torch.empty_like(x, device=dev) for _ in range(N)]
        dist.all_gather([as_bytes(w) for w in want], as_bytes(x), group=gloo)
        dist.all_gather(got, D(x))
        check(all(same(H(a), b) for a, b in zip(got, want)), f"all_gather {dtype} {count}")
        want_t = torch.empty(N * count, dtype=dtype)
        got_t = torch.empty(N * count, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(as_bytes(want_t), as_bytes(x), group=gloo)
        dist.all_gather_into_tensor(got_t, D(x))
        check(same(H(got_t), want_t), f"all_gather_into_tensor {dtype} {count}")
    ins = [moved_data(c, dtype, salt + 1) for c in (3, 4099)]
    with dist._coalescing_manager(async_ops=True) as cm:
        outs = [torch.empty(N * t.numel(), dtype=dtype, device=dev) for t in ins]
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, D(i))
    cm.wait()
    for o, i in zip(outs, ins):
        want = torch.empty(N * i.numel(), dtype=dtype)
        dist.all_gather_into_tensor(as_bytes(want), as_bytes(i), group=gloo)
        check(same(H(o), want), f"allgather_into_tensor_coalesced {dtype}")

# coalesced tensor forms, through torch's coalescing manager where it has one
ins = [data(c, torch.float32, 5) for c in (3, 4099)]
with dist._coalescing_manager(async_ops=True) as cm:
    outs = [torch.empty(N * t.numel(), device=dev) for t in ins]
    for o, i in zip(outs, ins):
        dist.all_gather_into_tensor(o, D(i))
cm.wait()
for o, i in zip(outs, ins):
    want = torch.empty(N * i.numel())
    dist.all_gather_into_tensor(want, i, group=gloo)
    check(same(H(o), want), "allgather_into_tensor_coalesced")
ins = [data(N * c, torch.float32, 6) for c in (3, 4099)]
with dist._coalescing_manager(async_ops=True) as cm:
    outs = [torch.empty(t.numel() // N, device=dev) for t in ins]
    for o, i in zip(outs, ins):
        dist.reduce_scatter_tensor(o, D(i))
cm.wait()
for o, i in zip(outs, ins):
    want = reference_reduce_scatter(i, i.numel() // N)
    check(same(H(o), want), "reduce_scatter_tensor_coalesced")
# all_reduce inside the coalescing manager with a device (DeepSpeed's
# helper): the work torch waits on covers them, both ways of waiting
for async_ops in (True, False):
    xs = [D(torch.full((n,), float(R + 1))) for n in (5, 1 << 18)]
    with dist._coalescing_manager(device=torch.device(dev), async_ops=async_ops) as cm:
        for x in xs:
            dist.all_reduce(x)
    if async_ops:
        cm.wait()
    for x in xs:
        check(same(H(x), torch.full((x.numel(),), float(N * (N + 1) // 2))),
              f"all_reduce in the coalescing manager with a device, async_ops={async_ops}")

dist.barrier()
work = dist.barrier(async_op=True)
work.wait()
check(work.is_completed(), "barrier work completed")
if DEVICE == "cuda":
    # As NCCL's: a barrier ends once the collectives queued before it are
    # done on the GPU, here behind ~0.2 s of GPU sleep on the caller's stream
    # (a test of the barrier in the queued mode only: a blocking call is done
    # when it returns).
    x = D(torch.full((1 << 20,), float(R + 1)))
    torch.cuda._sleep(int(3e8))
    work = dist.all_reduce(x, async_op=True)
    dist.barrier()
    check(work.is_completed(), "an all_reduce queued before a barrier is done after it")
    check(same(H(x), torch.full((1 << 20,), float(N * (N + 1) // 2))),
          "the all_reduce before the barrier")

# The shim returns no Work for a CUDA call torch waits for at once only
# where torch's Python skips wait() on None (torch 2.8 and later): a
# wrapper in distributed_c10d.py that passes async_op to the backend
# (opts.asyncOp) and calls work.wait() on whatever came back would raise
# AttributeError (torch 2.4's broadcast, all_gather_into_tensor,
# reduce_scatter_tensor).  Read from torch's own source, for the torch
# under test.
NO_WORK = smddp._C._sync_returns_no_work()


def unguarded_waits():
    """The functions of distributed_c10d.py that set opts.asyncOp and call
    work.wait() outside an `if work` / `work is not None` test."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(dist.distributed_c10d))

    def guards(test):
        return any(isinstance(n, ast.Compare) and isinstance(n.left, ast.Name)
                   and n.left.id == "work" and isinstance(n.ops[0], ast.IsNot)
                   for n in ast.walk(test)) or (isinstance(test, ast.Name) and test.id == "work")

    def bad_waits(node, guarded):
        if isinstance(node, ast.If):
            g = guarded or guards(node.test)
            return (sum(bad_waits(n, g) for n in node.body)
                    + sum(bad_waits(n, guarded) for n in node.orelse))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "wait" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "work"):
            return 0 if guarded else 1
        return sum(bad_waits(n, guarded) for n in ast.iter_child_nodes(node))

    found = []
    for f in tree.body:
        if not isinstance(f, ast.FunctionDef):
            continue
        sets = any(isinstance(n, ast.Attribute) and n.attr == "asyncOp"
                   and isinstance(n.ctx, ast.Store) for n in ast.walk(f))
        if sets and sum(bad_waits(n, False) for n in f.body):
            found.append(f.name)
    return found


unguarded = unguarded_waits()
check(not (NO_WORK and unguarded),
      f"torch {torch.__version__} calls work.wait() unguarded in {unguarded}, yet the shim "
      "returns no Work for async_op=False")
if R == 0:
    print(f"torch {torch.__version__}: no Work for async_op=False: {NO_WORK}; unguarded "
          f"wait() after opts.asyncOp in: {unguarded or 'none'}", flush=True)

if DEVICE == "cuda":
    # A call torch waits for at once (async_op=False; on the caller's
    # current stream in the queued mode, no Work returned where NO_WORK)
    # is ordered after the kernel that writes its input and before the one
    # that reads its output, with no wait() in between; so is one with
    # async_op=True after its wait().
    c10d = torch.distributed.distributed_c10d
    has_async_op = hasattr(c10d.AllreduceOptions(), "asyncOp")
    for async_op in (False, True):
        x = D(torch.zeros(1 << 16))
        torch.cuda._sleep(int(1e8))
        x.fill_(R + 1)
        before = smddp.torch._cuda_path_stats()["inline"]
        if has_async_op:
            # The group's own call: dist.all_reduce hides what it returns.
            opts = c10d.AllreduceOptions()
            opts.asyncOp = async_op
            work = c10d._get_default_group().allreduce([x], opts)
        else:
            work = dist.all_reduce(x, async_op=True)
        went_inline = smddp.torch._cuda_path_stats()["inline"] > before
        check((work is None) == (NO_WORK and went_inline and not async_op),
              f"allreduce(asyncOp={async_op}) returned {work!r} (inline: {went_inline})")
        if work is not None:
            work.wait()
        y = x * 2
        check(same(H(y), torch.full((1 << 16,), float(N * (N + 1)))),
              f"allreduce(asyncOp={async_op}) between two kernels on the current stream")

    # Every call torch's Python makes with async_op=False (which may get
    # None back), behind a GPU sleep on the current stream and read by the
    # next kernel there: the default stream, and a stream of the caller's.
    def sync_calls():
        n = 4099
        out = []
        x = D(torch.zeros(n))
        torch.cuda._sleep(int(5e7))
        x.fill_(R + 1)
        dist.all_reduce(x)
        out.append(("all_reduce", x * 1, torch.full((n,), float(N * (N + 1) // 2))))
        b = D(torch.zeros(n))
        torch.cuda._sleep(int(5e7))
        b.fill_(R + 7)
        dist.broadcast(b, src=N - 1)
        out.append(("broadcast", b * 1, torch.full((n,), float(N + 6))))
        r = D(torch.zeros(n))
        torch.cuda._sleep(int(5e7))
        r.fill_(R + 1)
        dist.reduce(r, dst=0)
        if R == 0:
            out.append(("reduce", r * 1, torch.full((n,), float(N * (N + 1) // 2))))
        g = D(torch.zeros(N * n))
        i = D(torch.zeros(n))
        torch.cuda._sleep(int(5e7))
        i.fill_(R + 1)
        dist.all_gather_into_tensor(g, i)
        out.append(("all_gather_into_tensor", g * 1,
                    torch.arange(1, N + 1).float().repeat_interleave(n)))
        gl = [D(torch.zeros(n)) for _ in range(N)]
        torch.cuda._sleep(int(5e7))
        i.fill_(R + 2)
        dist.all_gather(gl, i)
        out.append(("all_gather", torch.cat(gl) * 1,
                    torch.arange(2, N + 2).float().repeat_interleave(n)))
        s = D(torch.zeros(n))
        big = D(torch.zeros(N * n))
        torch.cuda._sleep(int(5e7))
        big.fill_(R + 1)
        dist.reduce_scatter_tensor(s, big)
        out.append(("reduce_scatter_tensor", s * 1, torch.full((n,), float(N * (N + 1) // 2))))
        sl = [D(torch.zeros(n)) for _ in range(N)]
        torch.cuda._sleep(int(5e7))
        for t in sl:
            t.fill_(R + 3)
        dist.reduce_scatter(s, sl)
        out.append(("reduce_scatter", s * 1, torch.full((n,), float(N * (N + 5) // 2))))
        # one dtype: torch 2.11 refuses a coalesced list of several
        cl = [D(torch.zeros(n)), D(torch.zeros(7))]
        torch.cuda._sleep(int(5e7))
        for t in cl:
            t.fill_(R + 1)
        dist.all_reduce_coalesced(cl)
        out.append(("all_reduce_coalesced", torch.cat([t.float() for t in cl]) * 1,
                    torch.full((n + 7,), float(N * (N + 1) // 2))))
        return out

    for name in ("default", "side"):
        stream = torch.cuda.current_stream() if name == "default" else torch.cuda.Stream()
        with torch.cuda.stream(stream):
            results = sync_calls()
            host = [(what, H(got), want) for what, got, want in results]
        for what, got, want in host:
            check(same(got, want), f"{what}(async_op=False) on the {name} stream")
# Functional collectives (torch.compile's, DTensor's) register the Work the
# backend returns and wait on it later: never None for them (their options
# keep asyncOp true).
import torch.distributed._functional_collectives as funcol  # noqa: E402

fx = D(torch.full((8,), float(R + 1)))
with warnings.catch_warnings():  # torch 2.15 renames them (all_gather_single...)
    warnings.simplefilter("ignore", FutureWarning)
    fr = funcol.all_reduce(fx, "sum", dist.group.WORLD)
    fg = funcol.all_gather_tensor(fx, 0, dist.group.WORLD)
    fs = funcol.reduce_scatter_tensor(D(torch.full((8 * N,), float(R + 1))), "sum", 0,
                                      dist.group.WORLD)
check(same(H(fr), torch.full((8,), float(N * (N + 1) // 2))), "funcol.all_reduce")
check(same(H(fg), torch.arange(1, N + 1).float().repeat_interleave(8)), "funcol.all_gather_tensor")
check(same(H(fs), torch.full((8,), float(N * (N + 1) // 2))), "funcol.reduce_scatter_tensor")

# A callback that waits for a later collective (a barrier) on the thread
# that completes works: the barrier waits for earlier callbacks, but not
# for one that waits for it (else both would wait out the group's 60 s).
# The other ranks join the all_reduce only once rank 0 has chained its
# callback, which therefore runs on a completer, not inline (where the
# all_reduce went through the worker).
slow = dist.new_group(backend="smddp", timeout=timedelta(seconds=60))
ran_on_main = []


def barrier_in_callback(f):
    ran_on_main.append(threading.current_thread() is threading.main_thread())
    dist.barrier(group=slow)


t0 = time.monotonic()
go = torch.zeros(1)
if R != 0:
    dist.broadcast(go, 0, group=gloo)
chained = dist.all_reduce(D(torch.ones(4)), group=slow, async_op=True).get_future().then(
    barrier_in_callback)
if R == 0:
    dist.broadcast(go, 0, group=gloo)
chained.wait()
check(time.monotonic() - t0 < 30,
      f"a barrier inside a future's callback took {time.monotonic() - t0:.1f} s")
# Unless the all_reduce ran on this thread (CUDA, libsmddp queueing device
# calls): its future was then complete when then() chained the callback.
inline = DEVICE == "cuda" and smddp.torch._cuda_path_stats(slow)["inline"] > 0
if R == 0 and N > 1 and not inline:
    check(ran_on_main == [False], "rank 0's callback ran on a completer thread")
dist.destroy_process_group(slow)

# A future with the result, as DDP's hooks use it
x = D(torch.ones(5) * (R + 1))
fut = dist.all_reduce(x, async_op=True).get_future()
res = fut.wait()
check(isinstance(res, list) and same(H(res[0]), torch.full((5,), float(N * (N + 1) // 2))),
      "get_future() gives the reduced tensor")

# What the backend does not do says so, instead of a wrong answer (point
# to point, gather, scatter and uneven all-to-all: test_p2p.py)
# ... and what to do instead
expect_error(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)),
             ["smddp", "int16", "cast", "int32", "gloo"], "int16 all_reduce")
expect_error(lambda: dist.all_reduce(torch.ones(3, dtype=torch.complex64), op=Op.MAX),
             [], "complex MAX", kind=(ValueError, RuntimeError))

# An output whose elements share memory is refused up front, and the group
# goes on (it once failed after the call, on every rank's next one)
expect_error(lambda: dist.all_reduce(D(torch.zeros(1)).expand(4)), ["smddp", "share memory"],
             "expanded output", kind=(ValueError, RuntimeError))
z = D(torch.ones(4))
dist.all_reduce(z)
check(same(H(z), torch.full((4,), float(N))), "all_reduce after a refused output")

# Coexistence: the gloo group still works after all this
y = torch.ones(3)
dist.all_reduce(y, group=gloo)
check(same(y, torch.full((3,), float(N))), "gloo group beside smddp")

# Which thread made the CUDA calls (docs/torch.md, "CUDA tensors: the worker
# or the caller's thread"): EXPECT_CUDA_PATH=inline where libsmddp queues
# device calls (the collectives that queue ran on this thread; the first,
# which decides the mode, and all_to_all, gather, scatter on the worker),
# worker where it blocks (none on this thread).
want = os.environ.get("EXPECT_CUDA_PATH")
if DEVICE == "cuda" and want:
    st = smddp.torch._cuda_path_stats()
    print(f"rank {R}: CUDA works: {st}", flush=True)
    check(st["worker"] > 0 and (st["inline"] > 0) == (want == "inline")
          and st["mode"] == ("queued" if want == "inline" else "blocking"),
          f"CUDA works ran {st}, expected on the {want}")
finish()
