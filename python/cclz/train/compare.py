"""`python -m cclz.train compare RUN_A RUN_B [--out DIR]`: two runs side by side.

Writes DIR/compare.md, a markdown table (final train and validation loss, the difference in
percent, tokens/s and the speed-up, bytes kept off the wire, GPU memory: torch's allocator peak
and the device's memory in use, which counts cclz's and NCCL's own buffers too), and
DIR/compare.png (train and validation loss against tokens, tokens/s against tokens) when
matplotlib is installed. Runs of different tokens per step are compared at equal tokens: the
plot's x axis is tokens, and the table says when their totals differ.
"""
import argparse
import os
import sys

from . import log as runlog


def _label(path, header):
    name = os.path.basename(os.path.normpath(path))
    if name == "log.jsonl":
        name = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return f"{name} ({header.get('policy', '?')})"


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def _row(label, header, steps, summary, base_summary):
    summary = summary or {}
    tps = summary.get("tokens_per_s")
    speedup = tps / base_summary["tokens_per_s"] if base_summary and tps and \
        base_summary.get("tokens_per_s") else None
    val = summary.get("final_val_loss")
    base_val = (base_summary or {}).get("final_val_loss")
    delta = 100 * (val - base_val) / base_val if val is not None and base_val else None
    raw = [s.get("wire_raw_bytes") or 0 for s in steps]
    sent = [s.get("wire_sent_bytes") or 0 for s in steps]
    off = 1 - sum(sent) / sum(raw) if sum(raw) else None
    layout = f"tp{header['tp']} pp{header['pp']} dp{header['dp']}"
    return (f"| {label} | {layout} | {_fmt(summary.get('tokens'), ',')} | "
            f"{_fmt(summary.get('final_loss'), '.4f')} | {_fmt(val, '.4f')} | "
            f"{_fmt(delta, '+.2f')} | {_fmt(tps, ',.0f')} | {_fmt(speedup, '.2f')} | "
            f"{'-' if off is None else f'{off:.0%}'} | {_fmt(summary.get('peak_mem_gb'), '.2f')} | "
            f"{_fmt(summary.get('device_used_gb'), '.2f')} |")


def table(runs):
    """The markdown table of [(label, header, steps, summary)]; the first run is the baseline."""
    base = runs[0][3]
    lines = ["| run | layout | tokens | train loss | val loss | val vs first (%) | tokens/s | "
             "speed-up | bytes off the wire | peak GPU GB (torch) | GPU GB in use (device) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_row(label, h, s, summ, base) for label, h, s, summ in runs]
    tokens = {(summ or {}).get("tokens") for _, _, _, summ in runs}
    if len(tokens) > 1:
        lines.append("")
        lines.append("Note: the runs trained on different numbers of tokens; compare the curves "
                     "at equal tokens.")
    return "\n".join(lines) + "\n"


def plot(runs, path):
    """Writes the PNG; returns False (and says so) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare: matplotlib is not installed (pip install matplotlib): "
              "writing the table only", file=sys.stderr)
        return False
    fig, (ax_loss, ax_val, ax_speed) = plt.subplots(1, 3, figsize=(15, 4.2))
    for label, _, steps, _ in runs:
        tokens = [s["tokens"] for s in steps]
        ax_loss.plot(tokens, [s["loss"] for s in steps], label=label)
        val = [(s["tokens"], s["val_loss"]) for s in steps if s.get("val_loss") is not None]
        if val:
            ax_val.plot(*zip(*val), marker="o", label=label)
        ax_speed.plot(tokens, [s["tokens_per_s"] for s in steps], label=label)
    for ax, title in ((ax_loss, "train loss"), (ax_val, "validation loss"),
                      (ax_speed, "tokens / s")):
        ax.set_title(title)
        ax.set_xlabel("tokens")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax_speed.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv):
    p = argparse.ArgumentParser(prog="python -m cclz.train compare",
                                description="Compare two cclz.train runs (the first is the "
                                            "baseline): a PNG and a markdown table.")
    p.add_argument("runs", nargs=2, metavar="RUN", help="run folder or its log.jsonl")
    p.add_argument("--out", help="where compare.png and compare.md go (default: the first "
                                 "run's parent folder)")
    a = p.parse_args(argv)
    runs = []
    for path in a.runs:
        try:
            header, steps, summary = runlog.read(path)
        except (OSError, ValueError) as e:
            print(f"compare: {e}", file=sys.stderr)
            return 2
        if not steps:
            print(f"compare: {path} has no logged steps", file=sys.stderr)
            return 2
        runs.append((_label(path, header), header, steps, summary))
    out = a.out or os.path.dirname(os.path.abspath(os.path.normpath(a.runs[0])))
    os.makedirs(out, exist_ok=True)
    md = table(runs)
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write(md)
    print(md, end="")
    png = os.path.join(out, "compare.png")
    if plot(runs, png):
        print(f"compare: wrote {png} and {os.path.join(out, 'compare.md')}")
    else:
        print(f"compare: wrote {os.path.join(out, 'compare.md')}")
    return 0
