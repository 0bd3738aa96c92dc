"""test_hosts.py - the backend across hosts, against gloo, however the job was launched.

Run one process per rank (env://: torchrun, smddp-run, srun); the hosts are
network namespaces of tests/cluster/torch-hosts.sh, or any real ones.  Checks
that the job spans hosts (HOSTS=N: that many distinct host names), then
collectives, a sub-group across hosts, point to point and a DDP training,
each against the same over a gloo group of the same ranks.
"""
import os
import socket

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from common import check, finish, same

dist.init_process_group(backend="smddp")
R, N = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
torch.set_num_threads(1)

# Where everyone runs: the test is only worth its name across hosts.
name = torch.tensor(list(socket.gethostname().encode()[:32].ljust(32, b"\0")), dtype=torch.uint8)
names = [torch.empty_like(name) for _ in range(N)]
dist.all_gather(names, name, group=gloo)
hosts = {bytes(n.tolist()).rstrip(b"\0").decode() for n in names}
want_hosts = int(os.environ.get("HOSTS", "0"))
check(not want_hosts or len(hosts) == want_hosts,
      f"the ranks run on {len(hosts)} host(s) {sorted(hosts)}, not {want_hosts}")
check(int(os.environ.get("LOCAL_WORLD_SIZE", N)) <= N, "LOCAL_WORLD_SIZE is at most WORLD_SIZE")


def data(count, dtype, salt):
    """Halves in [-8, 8): sums of a few ranks are exact in every dtype, in any order."""
    g = torch.Generator().manual_seed(1000 * salt + R)
    return (torch.randint(-16, 16, (count,), generator=g) / (2 if dtype.is_floating_point else 1)).to(dtype)


Op = dist.ReduceOp
# small (latency path), odd, and large enough to be chunked between hosts
for count in (1, 1001, 300_000):
    for dtype, ops in ((torch.float32, (Op.SUM, Op.MAX)), (torch.int64, (Op.SUM, Op.MIN)),
                       (torch.bfloat16, (Op.SUM,))):
        for op in ops:
            x = data(count, dtype, count + int(op))
            want = x.clone()
            dist.all_reduce(want, op=op, group=gloo)
            got = x.clone()
            dist.all_reduce(got, op=op)
            check(same(got, want), f"all_reduce {dtype} {op} x{count}")
    x = data(count, torch.float32, 7)
    want = torch.empty(N * count)
    dist.all_gather_into_tensor(want, x, group=gloo)
    got = torch.empty(N * count)
    dist.all_gather_into_tensor(got, x)
    check(same(got, want), f"all_gather_into_tensor x{count}")
    big = data(N * count, torch.float32, 8)
    full = big.clone()
    dist.all_reduce(full, group=gloo)
    got = torch.empty(count)
    dist.reduce_scatter_tensor(got, big)
    check(same(got, full[R * count:(R + 1) * count]), f"reduce_scatter_tensor x{count}")
    for root in {0, N - 1}:
        want = data(count, torch.int32, 9 + root)
        got = want.clone()
        dist.broadcast(want, root, group=gloo)
        dist.broadcast(got, root)
        check(same(got, want), f"broadcast from {root} x{count}")
    a2a = data(N * count, torch.float32, 10)
    want = torch.empty_like(a2a)
    dist.all_to_all_single(want, a2a, group=gloo)
    got = torch.empty_like(a2a)
    dist.all_to_all_single(got, a2a)
    check(same(got, want), f"all_to_all_single x{count}")
dist.barrier()

# A sub-group of every other rank, across hosts where there are several
# ranks per host, and the first and last rank: splits of the world.
for members in (list(range(0, N, 2)), sorted({0, N - 1})):
    sub = dist.new_group(members)
    gsub = dist.new_group(members, backend="gloo")
    if R in members:
        x = data(4097, torch.float64, 11)
        want = x.clone()
        dist.all_reduce(want, group=gsub)
        dist.all_reduce(x, group=sub)
        check(same(x, want), f"all_reduce in the group {members}")

# Point to point around a ring of hosts.
x = data(70_000, torch.float32, 12)
got = torch.empty_like(x)
reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, (R + 1) % N),
                               dist.P2POp(dist.irecv, got, (R - 1) % N)])
for q in reqs:
    q.wait()
want = data(70_000, torch.float32, 12)
want_from = torch.empty_like(want)
reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, want, (R + 1) % N, gloo),
                               dist.P2POp(dist.irecv, want_from, (R - 1) % N, gloo)])
for q in reqs:
    q.wait()
check(same(got, want_from), "send/recv around the ring")


# DDP: the same model, seed and batches over smddp and over gloo.
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 256)
        self.b = nn.Linear(256, 16)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def train(group):
    torch.manual_seed(0)
    model = Net()
    m = DDP(model, process_group=group, bucket_cap_mb=0.02)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + R)
    for _ in range(10):
        x, y = torch.randn(8, 32, generator=g), torch.randn(8, 16, generator=g)
        nn.functional.mse_loss(m(x), y).backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


a, b = train(None), train(gloo)
if N <= 2:
    ok = all(torch.equal(x, y) for x, y in zip(a, b))
else:
    ok = all(torch.allclose(x, y, rtol=1e-5, atol=1e-6) for x, y in zip(a, b))
check(ok, "DDP over smddp and over gloo train to different parameters")
finish(f"on {len(hosts)} hosts")
