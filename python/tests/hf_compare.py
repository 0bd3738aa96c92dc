"""hf_compare.py A B N - test_hf.py's parameters of job A (A.RANK.pt) equal job B's,
bit for bit, on each of N ranks, and moved from the initial ones; prints one
line and exits 1 where not."""
import sys

import torch

a, b, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
bad = []
for r in range(n):
    x, y = torch.load(f"{a}.{r}.pt"), torch.load(f"{b}.{r}.pt")
    if x.keys() != y.keys():
        bad.append(f"rank {r}: other tensors")
        continue
    for k in x:
        if not torch.equal(x[k], y[k]):
            d = (x[k].double() - y[k].double()).abs().max().item()
            bad.append(f"rank {r}: {k} differs by up to {d:g}")
    if r and any(not torch.equal(x[k], torch.load(f"{a}.0.pt")[k]) for k in x):
        bad.append(f"rank {r}: its replica differs from rank 0's")
first, init = torch.load(f"{a}.0.pt"), torch.load(f"{a}.init.pt")
moved = [k for k in first if first[k].is_floating_point() and not torch.equal(first[k], init[k])]
if len(moved) < len(first) // 2:
    bad.append(f"training moved only {len(moved)} of {len(first)} tensors")
if bad:
    print(f"HF-DIFF {a} vs {b}: {len(bad)} differences, first: {bad[0]}")
    sys.exit(1)
print(f"HF-SAME {a} vs {b}: {len(first)} tensors ({len(moved)} trained) on {n} ranks, bit for bit")
