#!/usr/bin/env python3
"""bench-plot.py: PNG charts of smddp-allreduce-bench --json runs, busbw against size.

One chart per collective, rank count, type, reduction and place (out of place,
in place; or both in one chart with --merge-places), one line per
implementation: libsmddp (rows with "impl":"smddp") against its anchor, which
is either the other rows of the same runs (--compare mpi writes "impl":"mpi",
--compare nccl "impl":"nccl") or the rows of --anchor files (another build, a
run from before a change).  Where several files hold the same chart, each
point is the median over them, as in scripts/bench-median.py, and a lower
panel shows the ratio anchor's time / ours (above 1: libsmddp is faster).
A line may begin with smddp-run's "[R] " tag.  Exit status: 0 ok, 1 a chart
could not be written, 2 usage error, bad input or no matplotlib.
"""
import argparse
import io
import json
import math
import os
import re
import statistics
import sys
import textwrap

PROG = os.path.basename(sys.argv[0])
NAMES = {"smddp": "libsmddp", "mpi": "Open MPI", "nccl": "NCCL"}
PLACES = {"oop": "out of place", "ip": "in place"}
NEED = ("collective", "size_bytes", "type", "redop", "nranks", "oop_time_us", "oop_busbw_gbps")
TAG = re.compile(r"^\[[0-9]+\] ")


def die(msg, code=2):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


class Parser(argparse.ArgumentParser):
    def error(self, message):  # util-linux style: one line, then where to look
        print(f"{PROG}: {message}\nTry '{PROG} --help'.", file=sys.stderr)
        sys.exit(2)


def parse_args():
    p = Parser(
        prog=PROG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Draw busbw against size from smddp-allreduce-bench --json runs "
        "(JSON lines, as --json or -J writes them; smddp-run's \"[R] \" tags are "
        "accepted): one PNG per collective, rank count, type, op and place, libsmddp "
        "against the anchor.",
        epilog="""The anchor is what the runs were compared with (--compare mpi or nccl:
rows whose impl is not "smddp"), or every row of the --anchor files.  Repeated
runs of one chart (several FILEs) are reduced to the median per size.

Title fields: {collective} {nranks} {type} {redop} {place} {runs} {ours} {anchor}

exit status: 0 ok, 1 a chart could not be written, 2 usage error, bad input
or matplotlib missing (pip install matplotlib).

examples:
  mpirun -np 2 smddp-allreduce-bench --compare mpi --json -b 8 -e 256M >run1.json
  scripts/bench-plot.py -o charts run1.json run2.json run3.json
  scripts/bench-plot.py --anchor before.json --anchor-label 'main 1bbd620' after.json""",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="--json output of smddp-allreduce-bench")
    p.add_argument("-a", "--anchor", action="append", default=[], metavar="FILE",
                   help="a run to draw as the anchor (all its rows); may be repeated")
    p.add_argument("--anchor-label", metavar="TEXT",
                   help="legend of --anchor's rows (default: their file name)")
    p.add_argument("-o", "--output-dir", default=".", metavar="DIR",
                   help="where the PNGs go (made if missing; default: .)")
    p.add_argument("-p", "--prefix", default="", metavar="TEXT",
                   help="prepended to every PNG's name, which is otherwise "
                   "COLLECTIVE-NRANKSr-TYPE-OP-PLACE.png")
    p.add_argument("-t", "--title", metavar="TEXT",
                   help="chart title, with the fields below (default: "
                   "'{collective}, {nranks} ranks, {type} {redop}, {place}')")
    p.add_argument("--place", choices=PLACES, help="only out of place (oop) or in place (ip)")
    p.add_argument("--merge-places", action="store_true",
                   help="out of place (solid) and in place (dashed) in one chart")
    p.add_argument("--log-y", action="store_true", help="logarithmic busbw axis")
    p.add_argument("--no-ratio", action="store_true", help="leave out the ratio panel")
    p.add_argument("--dpi", type=int, default=100, help="resolution (default: 100)")
    return p.parse_args()


def read_rows(path, anchor):
    """Rows of one file as (series, key, size, place, time_us, busbw_gbps)."""
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    out = []
    with f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(TAG.sub("", line, count=1))
            except ValueError:
                die(f"{path}:{n}: not a JSON line of smddp-allreduce-bench --json: "
                    f"{line.strip()[:60]}")
            if not isinstance(r, dict) or any(k not in r for k in NEED):
                die(f"{path}:{n}: not a line of smddp-allreduce-bench --json "
                    f"(needs {', '.join(NEED)})")
            impl = r.get("impl", "smddp")
            series = "anchor" if anchor else impl
            key = (r["collective"], r["nranks"], r["type"], r["redop"])
            for place in PLACES:
                t, bw = r.get(place + "_time_us"), r.get(place + "_busbw_gbps")
                if t is None or bw is None:  # sendrecv, alltoallv: no in-place half
                    continue
                if not all(isinstance(v, (int, float)) for v in (t, bw, r["size_bytes"])):
                    die(f"{path}:{n}: {place}_time_us, {place}_busbw_gbps and size_bytes "
                        "must be numbers")
                out.append((series, impl, key, r["size_bytes"], place, t, bw))
    if not out:
        die(f"{path}: no rows of smddp-allreduce-bench --json in it")
    return out


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.3g} {unit}"
        n /= 1024


def collect(args):
    """{(key, place): {series: {size: [(time, busbw) per file]}}}, labels, runs."""
    charts, impls, runs = {}, {}, {}
    for anchor, paths in ((False, args.files), (True, args.anchor)):
        for path in paths:
            seen = set()
            for series, impl, key, size, place, t, bw in read_rows(path, anchor):
                if size <= 0:  # nothing moved, and no place on a log axis
                    continue
                impls.setdefault(series, set()).add(impl)
                charts.setdefault((key, place), {}).setdefault(series, {}) \
                    .setdefault(size, []).append((t, bw))
                seen.add((key, series))
            for ks in seen:
                runs[ks] = runs.get(ks, 0) + 1
    if args.anchor and any(s not in ("smddp", "anchor") for s in impls):
        die("--anchor given, but the runs hold --compare rows too: draw one anchor at a time")
    if "smddp" not in impls:
        die("no libsmddp rows (\"impl\":\"smddp\") in " + ", ".join(args.files))
    labels = {}
    for s in impls:
        if s == "anchor":
            labels[s] = args.anchor_label or ", ".join(os.path.basename(a) for a in args.anchor)
        else:
            labels[s] = NAMES.get(s, s)
    return charts, labels, runs


def plot(args, plt, ticker, Image, key, places, data, labels, runs):
    collective, nranks, dtype, redop = key
    series = ["smddp"] + sorted(s for s in labels if s != "smddp")
    anchors = [s for s in series[1:] if any(s in data[p] for p in places)]
    ratio = anchors and not args.no_ratio
    if ratio:
        fig, (ax, rx) = plt.subplots(2, 1, figsize=(7.5, 5.4), sharex=True,
                                     gridspec_kw={"height_ratios": [3, 1.2]})
    else:
        fig, ax = plt.subplots(figsize=(7.5, 4.2))
    palette = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    colors = {s: palette[i % len(palette)] for i, s in enumerate(series)}
    styles = {"oop": "-", "ip": "--"}
    med = statistics.median
    sizes_all, ratios = set(), []
    for place in places:
        for s in series:
            pts = data[place].get(s)
            if not pts:
                continue
            sizes = sorted(pts)
            sizes_all.update(sizes)
            n = runs.get((key, s), 1)
            lab = labels[s] + (f", {PLACES[place]}" if len(places) > 1 else "") + \
                (f" (median of {n})" if n > 1 else "")
            ax.plot(sizes, [med(b for _, b in pts[z]) for z in sizes], styles[place],
                    color=colors[s], marker="o", markersize=3, linewidth=1.5, label=lab)
            if ratio and s != "smddp" and "smddp" in data[place]:
                ours = data[place]["smddp"]
                common = [z for z in sizes if z in ours and med(t for t, _ in ours[z]) > 0]
                rs = [med(t for t, _ in pts[z]) / med(t for t, _ in ours[z]) for z in common]
                ratios += [r for r in rs if r > 0]
                rx.plot(common, rs, styles[place], color=colors[s], marker="o", markersize=3,
                        linewidth=1.2)
    fields = {"collective": collective, "nranks": nranks, "type": dtype, "redop": redop,
              "place": " and ".join(PLACES[p] for p in places),
              "runs": max(runs.get((key, s), 1) for s in series),
              "ours": labels["smddp"], "anchor": " and ".join(labels[s] for s in anchors)}
    title = args.title or "{collective}, {nranks} ranks, {type} {redop}, {place}"
    try:
        ax.set_title(textwrap.fill(title.format(**fields), 80), fontsize="medium")
    except (KeyError, IndexError, ValueError) as e:
        die(f"--title: bad field {e} (known: {', '.join(fields)})")
    ax.set_ylabel("busbw (GB/s)")
    if args.log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    bottom = rx if ratio else ax
    if ratio:
        # log: 2x faster and 2x slower lie as far from 1 either way
        rx.set_yscale("log")
        narrow = ratios and max(ratios + [1]) / min(ratios + [1]) < 20
        subs = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0) if narrow else (1.0, 2.0, 5.0)
        rx.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
        rx.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
        rx.yaxis.set_minor_formatter(ticker.NullFormatter())
        rx.axhline(1.0, color="gray", linewidth=0.8)
        rx.set_ylabel("their time / ours\n(>1: ours faster)", fontsize="small")
        rx.grid(True, which="major", alpha=0.3)
    # log2 axis; labels under measured sizes, from the largest down, each at
    # least 1/14 of the axis from the last, so that they do not run together
    sizes = sorted(sizes_all, reverse=True)
    gap = math.log2(sizes[0] / sizes[-1]) / 14
    ticks = [sizes[0]]
    for z in sizes[1:]:
        if math.log2(ticks[-1] / z) >= gap:
            ticks.append(z)
    bottom.set_xscale("log", base=2)
    ax.set_xscale("log", base=2)
    bottom.xaxis.set_major_locator(ticker.FixedLocator(ticks))
    bottom.xaxis.set_minor_locator(ticker.NullLocator())
    bottom.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: human(v)))
    bottom.set_xlabel("size (bytes, as nccl-tests count them)")
    plt.setp(bottom.get_xticklabels(), rotation=30, ha="right", fontsize="small")
    fig.tight_layout()
    name = "-".join([collective, f"{nranks}r", dtype, redop, "-".join(places)])
    path = os.path.join(args.output_dir, args.prefix + name + ".png")
    # A chart has a handful of colours: a 256-colour palette keeps it a
    # third of the size (for docs/), which Pillow (matplotlib needs it) does.
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=args.dpi)
    buf.seek(0)
    img = Image.open(buf).convert("RGB").quantize(256)
    try:
        img.save(path, format="PNG", optimize=True)
    except OSError as e:
        die(f"cannot write {path}: {e.strerror}", 1)
    plt.close(fig)
    return path


def main():
    args = parse_args()
    if args.anchor_label and not args.anchor:
        die("--anchor-label needs --anchor")
    if args.dpi < 20 or args.dpi > 600:
        die("--dpi: between 20 and 600")
    charts, labels, runs = collect(args)  # bad input fails before matplotlib is needed
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker as ticker
        from PIL import Image
    except ImportError as e:
        die(f"matplotlib cannot be imported by {sys.executable} ({e}): "
            "pip install matplotlib, or run this script with a python that has it")
    try:
        os.makedirs(args.output_dir, exist_ok=True)
    except OSError as e:
        die(f"cannot make {args.output_dir}: {e.strerror}", 1)
    groups = {}
    for (key, place), data in charts.items():
        if args.place and place != args.place:
            continue
        groups.setdefault((key, "all" if args.merge_places else place), {})[place] = data
    for (key, _), data in sorted(groups.items()):
        places = [p for p in PLACES if p in data]
        print(plot(args, plt, ticker, Image, key, places, data, labels, runs))


if __name__ == "__main__":
    main()
