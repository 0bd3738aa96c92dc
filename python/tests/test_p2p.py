"""test_p2p.py - point to point, the uneven and rooted exchanges, sparse all-reduce and
split_group of the smddp backend, against gloo.

Run one process per rank (env://: smddp-run -n N), 1 to 4 ranks.  The world is
an smddp group; a gloo group over the same ranks does the same calls on the
same inputs, and the results must agree bit for bit.  Where the two cannot do
the same call (a plain isend to oneself, a receive from any source, whose
order is a race), the reference is computed by hand.
"""
import inspect
import math
import os

import torch
import torch.distributed as dist

from common import Deadline, check, expect_error, finish, same

dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
check(dist.get_backend() == "smddp", f"default backend is {dist.get_backend()}")

DEVICE = os.environ.get("DEVICE", "cpu")
if DEVICE == "cuda":
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", R)) % torch.cuda.device_count())
dev = torch.device(DEVICE)


def D(t):
    """The smddp side's copy of a tensor, on the device under test."""
    return t.clone().to(dev)


def H(t):
    return t.cpu()


# Those of test_collectives.py, and int16, which only moves here.
DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.bool, torch.complex64,
          torch.complex128]


def data(shape, dtype, salt, rank=None):
    """Small integers, different on each rank (rank: whose data)."""
    rank = R if rank is None else rank
    g = torch.Generator().manual_seed(1000 * salt + 7 * rank + 1)
    if isinstance(shape, int):
        shape = (shape,)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    lo, hi = (0, 60) if dtype == torch.uint8 else (-20, 21)
    x = torch.randint(lo, hi, shape, generator=g)
    if dtype.is_complex:
        y = torch.randint(lo, hi, shape, generator=g)
        return torch.complex(x.float(), y.float()).to(dtype)
    return x.to(dtype)


def as_gloo(t):
    """The same bytes in a dtype that gloo moves (it has no int16 outside
    send/recv, nor complex gather), the first dimension kept."""
    if t.dtype != torch.int16 and not t.is_complex():
        return t
    rows = t.shape[0] if t.dim() else 1
    return t.reshape(rows, math.prod(t.shape[1:])).view(torch.uint8)


def from_gloo(b, like):
    """as_gloo's bytes back in like's dtype and shape."""
    return b if b.dtype == like.dtype else b.view(like.dtype).reshape(like.shape)


def batch(ops):
    """batch_isend_irecv, coalesced on CPU too: torch that does not ask the
    backend (supports_coalescing) coalesces CUDA tensors only (2.4)."""
    if "supports_coalescing" in inspect.getsource(dist.batch_isend_irecv):
        return dist.batch_isend_irecv(ops)
    if ops[0].group is not None and dist.get_backend(ops[0].group) == "gloo":
        return dist.batch_isend_irecv(ops)  # gloo sends without waiting
    with dist._coalescing_manager(ops[0].group, ops[0].tensor.device, async_ops=True) as cm:
        for op in ops:
            op.op(op.tensor, op.peer, op.group, op.tag)
    return cm.works


deadline = Deadline(500)
salt = 0

# ---- send and recv, plain: rank 0 to each other rank and back, with tags ----
for dtype in DTYPES:
    for count in (0, 1, 4099):
        salt += 1
        for g, name in ((None, "smddp"), (gloo, "gloo")):
            mine = data(count, dtype, salt)
            if R == 0:
                got = []
                for peer in range(1, N):
                    dist.send(D(mine) if g is None else mine, peer, group=g, tag=peer)
                for peer in range(1, N):
                    t = torch.empty_like(mine, device=dev if g is None else "cpu")
                    dist.recv(t, peer, group=g, tag=100 + peer)
                    got.append(H(t))
            else:
                t = torch.empty_like(mine, device=dev if g is None else "cpu")
                dist.recv(t, 0, group=g, tag=R)
                dist.send(D(mine) if g is None else mine, 0, group=g, tag=100 + R)
                got = [H(t)]
            if g is None:
                mine_smddp = got
            else:
                check(len(got) == len(mine_smddp) and all(same(a, b) for a, b in zip(mine_smddp, got)),
                      f"send/recv {dtype} count {count}")
        want = [data(count, dtype, salt, rank=p) for p in range(1, N)] if R == 0 else [
            data(count, dtype, salt, rank=0)]
        check(all(same(a, b) for a, b in zip(mine_smddp, want)),
              f"send/recv {dtype} count {count}: the sender's data")

# non-contiguous sends and receives (copied to contiguous buffers and back)
if N > 1:
    m = data((6, 8), torch.float32, 77)
    if R == 0:
        dist.send(D(m).t(), 1, tag=3)
    elif R == 1:
        out = torch.zeros(16, 6, device=dev)[::2]  # 8 x 6, every other row
        dist.recv(out, 0, tag=3)
        check(same(H(out), data((6, 8), torch.float32, 77, rank=0).t().contiguous()),
              "recv into a non-contiguous tensor")

# ---- out-of-order tags inside a batch: sent tag 1, 2, 3, received 3, 1, 2 ----
if N > 1:
    salt += 1
    nxt, prv = (R + 1) % N, (R - 1) % N
    for g in (None, gloo):
        on = dev if g is None else torch.device("cpu")
        sends = [data(100 + k, torch.float32, salt + k).to(on) for k in range(3)]
        recvs = {k: torch.empty(100 + k, device=on) for k in range(3)}
        ops = [dist.P2POp(dist.isend, sends[k], nxt, g, tag=k + 1) for k in range(3)]
        ops += [dist.P2POp(dist.irecv, recvs[k], prv, g, tag=k + 1) for k in (2, 0, 1)]
        for w in batch(ops):
            w.wait()
        if g is None:
            smddp_got = [H(recvs[k]) for k in range(3)]
        else:
            check(all(same(a, recvs[k]) for k, a in enumerate(smddp_got)),
                  "batch with tags received out of order")
    want = [data(100 + k, torch.float32, salt + k, rank=prv) for k in range(3)]
    check(all(same(a, b) for a, b in zip(smddp_got, want)), "batch tags: the data of each tag")

    # the same tag twice from one sender matches in the order sent
    a, b = D(torch.full((5,), float(R))), D(torch.full((5,), float(R + 100)))
    ra, rb = torch.empty(5, device=dev), torch.empty(5, device=dev)
    ws = batch([dist.P2POp(dist.isend, a, nxt, tag=9),
                                 dist.P2POp(dist.isend, b, nxt, tag=9),
                                 dist.P2POp(dist.irecv, ra, prv, tag=9),
                                 dist.P2POp(dist.irecv, rb, prv, tag=9)])
    for w in ws:
        w.wait()
    check(same(H(ra), torch.full((5,), float(prv))) and same(H(rb), torch.full((5,), float(prv + 100))),
          "one tag twice: matched in the order sent")

# ---- recv from any source ----------------------------------------------------------
if N > 1:
    if R == 0:
        seen = {}
        for _ in range(N - 1):
            t = torch.empty(7, dtype=torch.int64, device=dev)
            src = dist.recv(t, tag=5)  # src=None: from anyone
            seen[src] = H(t)
        check(sorted(seen) == list(range(1, N)), f"recv from any source: sources {sorted(seen)}")
        check(all(same(t, torch.full((7,), 1000 + s)) for s, t in seen.items()),
              "recv from any source: each message is its sender's")
        # irecv from anyone: the work's source rank
        t = torch.empty(3, device=dev)
        w = dist.irecv(t, tag=6)
        w.wait()
        check(w._source_rank() == N - 1 and same(H(t), torch.full((3,), float(N - 1))),
              "irecv from any source: _source_rank()")
    else:
        dist.send(D(torch.full((7,), 1000 + R)), 0, tag=5)
        if R == N - 1:
            dist.send(D(torch.full((3,), float(R))), 0, tag=6)

# ---- batch_isend_irecv: ring exchange both ways, large enough to need a peer -------
# One by one each rank's first send would wait for its neighbour's receive
# while the neighbour waits in its own send: the batch makes it one group.
for count in (1, 1 << 20):
    salt += 1
    nxt, prv = (R + 1) % N, (R - 1) % N
    results = []
    for g in ((None, gloo) if N > 1 else (None,)):
        on = dev if g is None else torch.device("cpu")
        to_next, to_prev = data(count, torch.float32, salt).to(on), data(count, torch.float32, salt + 1).to(on)
        from_prev, from_next = torch.empty(count, device=on), torch.empty(count, device=on)
        # tags tell the two directions apart where next and previous are
        # one rank (2 ranks) or this one (1 rank)
        ops = [dist.P2POp(dist.isend, to_next, nxt, g, tag=0),
               dist.P2POp(dist.isend, to_prev, prv, g, tag=1),
               dist.P2POp(dist.irecv, from_prev, prv, g, tag=0),
               dist.P2POp(dist.irecv, from_next, nxt, g, tag=1)]
        works = batch(ops)
        for w in works:
            w.wait()
        results.append((H(from_prev), H(from_next)))
    if N == 1:  # to oneself, inside one batch
        want = (data(count, torch.float32, salt), data(count, torch.float32, salt + 1))
    else:
        want = results[1]
    check(same(results[0][0], want[0]) and same(results[0][1], want[1]),
          f"ring exchange both ways in one batch, count {count}")
    if N > 1:
        check(same(results[0][0], data(count, torch.float32, salt, rank=prv)),
              f"ring exchange: from the previous rank, count {count}")

# a batch left open by an exception fails its works, and the next batch runs
try:
    with dist._coalescing_manager(None, dev, async_ops=True):
        stale = dist.isend(D(torch.ones(2)), (R + 1) % N)
        raise KeyError("leaving the batch")
except KeyError:
    pass
x, y = D(torch.full((4,), float(R))), torch.empty(4, device=dev)
for w in batch([dist.P2POp(dist.isend, x, (R + 1) % N, tag=1),
                dist.P2POp(dist.irecv, y, (R - 1) % N, tag=1)]):
    w.wait()
check(same(H(y), torch.full((4,), float((R - 1) % N))), "a batch after one left open")
expect_error(lambda: stale.wait(), ["smddp", "never ended"], "the work of a batch left open")

# every dtype through one batch of a ring
if N > 1:
    for dtype in DTYPES:
        salt += 1
        x = data((3, 5), dtype, salt)
        y = torch.empty_like(x, device=dev)
        for w in batch([dist.P2POp(dist.irecv, y, (R - 1) % N),
                                         dist.P2POp(dist.isend, D(x), (R + 1) % N)]):
            w.wait()
        check(same(H(y), data((3, 5), dtype, salt, rank=(R - 1) % N)), f"ring batch {dtype}")

# ---- all_to_all_single with uneven splits (MoE: tokens routed by expert) -------
def a2a_by_splits(splits, width, dtype, salt, what):
    """splits[i][j]: rows rank i sends rank j; checked against gloo."""
    send = splits[R].tolist()
    recv = splits[:, R].tolist()
    x = data((sum(send), width), dtype, salt)
    if width == 1:
        x = x.reshape(-1)
    want = torch.empty((sum(recv),) + tuple(x.shape[1:]), dtype=dtype)
    wb = as_gloo(want)
    dist.all_to_all_single(wb, as_gloo(x), recv, send, group=gloo)
    want = from_gloo(wb, want)
    got = torch.empty_like(want, device=dev)
    dist.all_to_all_single(got, D(x), recv, send)
    check(same(H(got), want), f"all_to_all_single {what} {dtype} width {width} splits {splits.tolist()}")


for dtype in DTYPES:
    for width in (1, 3):
        salt += 1
        g = torch.Generator().manual_seed(salt)
        # zeros included
        splits = torch.randint(0, 4, (N, N), generator=g)
        splits[0, N - 1] = 0
        splits[N - 1, 0] = 5
        a2a_by_splits(splits, width, dtype, salt, "uneven")
    # rank 0's blocks equal both ways, rank N-1's not: one protocol for both
    if N > 1:
        salt += 1
        splits = torch.ones((N, N), dtype=torch.int64)
        splits[N - 1, N - 1] = 2
        a2a_by_splits(splits, 2, dtype, salt, "even on rank 0 only")
    # output splits only (the input even) and one rank getting nothing
    if N > 1:
        x = data(2 * N, dtype, salt)
        recv = [2] * N
        got = torch.empty(2 * N, dtype=dtype, device=dev)
        want = torch.empty(2 * N, dtype=dtype)
        wb = as_gloo(want)
        dist.all_to_all_single(wb, as_gloo(x), recv, None, group=gloo)
        want = from_gloo(wb, want)
        dist.all_to_all_single(got, D(x), recv, None)
        check(same(H(got), want), f"all_to_all_single output splits only {dtype}")

if N > 1:
    # bad splits say so, on the caller's thread
    expect_error(lambda: dist.all_to_all_single(torch.empty(3), torch.ones(3), [1] * N, [4] + [0] * (N - 1)),
                 ["smddp", "split"], "splits that do not add up", kind=(ValueError, RuntimeError))

# ---- all_to_all (lists), gather, scatter ------------------------------------------
for dtype in DTYPES:
    salt += 1
    ins = [data(((R + q) % 3 + 1, 2), dtype, salt + q) for q in range(N)]
    shapes = [((q + R) % 3 + 1, 2) for q in range(N)]
    want = [torch.empty(s, dtype=dtype) for s in shapes]
    try:
        wb = [as_gloo(t) for t in want]
        dist.all_to_all(wb, [as_gloo(t) for t in ins], group=gloo)
        want = [from_gloo(b, t) for b, t in zip(wb, want)]
    except RuntimeError:  # gloo without all_to_all lists (older torch): by hand
        flat = torch.empty((sum(s[0] for s in shapes), 2), dtype=dtype)
        fb = as_gloo(flat)
        dist.all_to_all_single(fb, as_gloo(torch.cat(ins)), [s[0] for s in shapes],
                               [t.shape[0] for t in ins], group=gloo)
        want = list(from_gloo(fb, flat).split([s[0] for s in shapes]))
    got = [torch.empty(s, dtype=dtype, device=dev) for s in shapes]
    dist.all_to_all(got, [D(t) for t in ins])
    check(all(same(H(a), b) for a, b in zip(got, want)), f"all_to_all lists {dtype}")

    for count in (0, 5, 4099):
        salt += 1
        for root in range(N):
            x = data(count, dtype, salt)
            want = [torch.empty_like(as_gloo(x)) for _ in range(N)] if R == root else None
            dist.gather(as_gloo(x), want, root, group=gloo)
            want = [from_gloo(b, x) for b in want] if want else None
            got = [torch.empty_like(x, device=dev) for _ in range(N)] if R == root else None
            dist.gather(D(x), got, root)
            if R == root:
                check(all(same(H(a), b) for a, b in zip(got, want)),
                      f"gather {dtype} count {count} root {root}")
            parts = [data(count, dtype, salt + 50 + q) for q in range(N)] if R == root else None
            want = torch.empty(count, dtype=dtype)
            wb = as_gloo(want)
            dist.scatter(wb, [as_gloo(p) for p in parts] if parts else None, root, group=gloo)
            want = from_gloo(wb, want)
            got = torch.empty(count, dtype=dtype, device=dev)
            dist.scatter(got, [D(p) for p in parts] if parts else None, root)
            check(same(H(got), want), f"scatter {dtype} count {count} root {root}")

# ---- all_gather_coalesced (lists of output lists) ---------------------------------
for dtype in (torch.int8, torch.int64, torch.bfloat16, torch.float32, torch.complex128, torch.bool):
    salt += 1
    ins = [data(s, dtype, salt + k) for k, s in enumerate([(3,), (0,), (2, 7), (4099,)])]
    want = [[torch.empty_like(t) for t in ins] for _ in range(N)]
    dist.all_gather_coalesced(want, ins, group=gloo)
    got = [[torch.empty_like(t, device=dev) for t in ins] for _ in range(N)]
    dist.all_gather_coalesced(got, [D(t) for t in ins])
    check(all(same(H(a), b) for ga, wa in zip(got, want) for a, b in zip(ga, wa)),
          f"all_gather_coalesced {dtype}")

# ---- sparse all-reduce (COO) ----------------------------------------------------------
if DEVICE == "cpu":
    for dtype in (torch.float32, torch.float64, torch.int64, torch.int32):
        for dense in (False, True):
            salt += 1
            g = torch.Generator().manual_seed(salt * 10 + R)
            nnz = 0 if R == N - 1 and N > 1 else 3 + R  # a rank with nothing
            idx = torch.randint(0, 5, (2, nnz), generator=g)  # duplicates: uncoalesced
            shape = (6, 5, 4) if dense else (6, 5)
            vshape = (nnz, 4) if dense else (nnz,)
            val = torch.randint(-9, 10, vshape, generator=g).to(dtype)
            x = torch.sparse_coo_tensor(idx, val, shape, check_invariants=True)
            want, got = x.clone(), x.clone()
            dist.all_reduce(want, group=gloo)
            dist.all_reduce(got)
            check(got.is_sparse and got.is_coalesced(), f"sparse all_reduce {dtype}: coalesced result")
            check(same(got.to_dense(), want.to_dense()) and
                  same(got.coalesce().indices(), want.coalesce().indices()),
                  f"sparse all_reduce {dtype} dense dims {dense}")
    expect_error(lambda: dist.all_reduce(torch.sparse_coo_tensor([[0]], [1.0], (3,), check_invariants=True),
                                         op=dist.ReduceOp.MAX),
                 ["smddp", "sparse", "SUM"], "sparse all_reduce MAX", kind=(ValueError, RuntimeError))
    if N > 1:  # shapes that differ: every rank fails alike, the group stays usable
        bad = torch.sparse_coo_tensor([[0]], [1.0], (3 + (R == 1),), check_invariants=True)
        expect_error(lambda: dist.all_reduce(bad), ["smddp", "sparse", "rank"],
                     "sparse all_reduce of different shapes", kind=(ValueError, RuntimeError))
        y = torch.ones(4)
        dist.all_reduce(y)
        check(same(y, torch.full((4,), float(N))), "the group after a sparse shape mismatch")

# ---- split_group --------------------------------------------------------------------
if hasattr(dist, "split_group"):
    supports = dist.group.WORLD._get_backend(torch.device("cpu")).supports_splitting
    if supports:
        # reversed order inside each part: the place in the list is the new rank
        parts = [list(range(N // 2))[::-1], list(range(N // 2, N))[::-1]] if N > 1 else [[0]]
        sub = dist.split_group(split_ranks=parts)
        mine = next(p for p in parts if R in p)
        check(sub is not None and sub != dist.GroupMember.NON_GROUP_MEMBER, "split_group: a member")
        check(dist.get_rank(sub) == mine.index(R), f"split_group: rank {dist.get_rank(sub)} in {mine}")
        check(dist.get_backend(sub) == "smddp", f"split_group backend {dist.get_backend(sub)}")
        x = torch.full((1027,), float(R + 1))
        dist.all_reduce(x, group=sub)
        check(same(x, torch.full((1027,), float(sum(m + 1 for m in mine)))), "split_group: all_reduce")
        x = torch.full((3,), float(R))
        dist.broadcast(x, mine[0], group=sub)
        check(same(x, torch.full((3,), float(mine[0]))), "split_group: broadcast from its rank 0")
        # a split leaving ranks out: they get no group
        if N > 1:
            only = dist.split_group(split_ranks=[[0, N - 1]])
            if R in (0, N - 1):
                y = torch.ones(2)
                dist.all_reduce(y, group=only)
                check(same(y, torch.full((2,), 2.0)), "split_group of two: all_reduce")
            else:
                check(only is None or only == dist.GroupMember.NON_GROUP_MEMBER,
                      "split_group: a rank left out gets no group")
        dist.destroy_process_group(sub)
    else:
        print(f"rank {R}: torch {torch.__version__}: split_group is not offered (supports_splitting "
              "is False before torch 2.15)", flush=True)

# ---- what stays unsupported says so --------------------------------------------------
if N > 1:
    expect_error(lambda: dist.isend(torch.ones(1), R, tag=0).wait(), ["smddp", "itself", "batch_isend_irecv"],
                 "a plain isend to oneself", kind=(ValueError, RuntimeError))
expect_error(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)), ["smddp", "int16"],
             "int16 all_reduce")

check(deadline.left() > 0, "the test ran within its deadline")
y = torch.ones(3)
dist.all_reduce(y, group=gloo)
check(same(y, torch.full((3,), float(N))), "gloo group beside smddp")
dist.barrier()
finish()
