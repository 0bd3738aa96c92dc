"""params_compare.py [--rtol R] A B - two parameter files that the examples save
(torch.save of a dict name -> tensor) hold the same tensors: bit for bit, or
with --rtol within R relative (and R/100 absolute: parameters near zero).
Prints one line; exits 1 where they differ."""
import argparse
import sys

import torch

p = argparse.ArgumentParser()
p.add_argument("--rtol", type=float, default=0.0)
p.add_argument("a")
p.add_argument("b")
args = p.parse_args()
x, y = torch.load(args.a), torch.load(args.b)
bad, worst = [], 0.0
if x.keys() != y.keys():
    bad.append(f"other tensors: {sorted(x.keys() ^ y.keys())[:3]}")
for k in x.keys() & y.keys():
    if x[k].shape != y[k].shape or x[k].dtype != y[k].dtype:
        bad.append(f"{k}: {x[k].dtype}{list(x[k].shape)} against {y[k].dtype}{list(y[k].shape)}")
        continue
    d = (x[k].double() - y[k].double()).abs().max().item() if x[k].numel() else 0.0
    worst = max(worst, d)
    if args.rtol == 0:
        ok = torch.equal(x[k], y[k])
    else:
        ok = torch.allclose(x[k], y[k], rtol=args.rtol, atol=args.rtol / 100)
    if not ok:
        bad.append(f"{k} differs by up to {d:g}")
how = "bit for bit" if args.rtol == 0 else f"within rtol {args.rtol:g}"
if bad:
    print(f"PARAMS-DIFF {args.a} vs {args.b} ({how}): {len(bad)} differences, first: {bad[0]}")
    sys.exit(1)
print(f"PARAMS-SAME {args.a} vs {args.b}: {len(x)} tensors {how} (max difference {worst:g})")
