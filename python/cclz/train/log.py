"""What a user sees of a run: rank 0 prints a compact progress line every few steps and writes
the run's log, `<out>/log.jsonl`: a config header line, then one line per logged step, then a
summary line. `compare` reads these files.

A step line: step, tokens (seen so far), loss (the mean over the steps since the last line),
val_loss (where evaluated), lr, grad_norm, tokens_per_s (training time only), wire_raw_bytes and
wire_sent_bytes (per step, all ranks together: what cclz's collectives would have sent
uncompressed and the estimate of what they sent, see wire.py), overlap_serial_share (with
--overlap: the share of the overlapped GEMM calls an adaptive communicator ran serially),
peak_mem_gb (GPU: torch's allocator peak, the largest rank's) and device_used_gb (GPU: the
device's memory in use at the log line, cclz's and NCCL's own buffers included, the largest
rank's)."""
import json
import os
import sys
import time


def _si(x):
    for unit in ("", "k", "M", "G"):
        if abs(x) < 1000:
            return f"{x:.1f}{unit}"
        x /= 1000
    return f"{x:.1f}T"


def _bytes(x):
    for unit in ("B", "KB", "MB", "GB"):
        if abs(x) < 1024:
            return f"{x:.1f} {unit}"
        x /= 1024
    return f"{x:.1f} TB"


class RunLog:
    """Writes only on rank 0 (write=True); the other ranks make the same calls for free."""

    def __init__(self, out_dir, header, write, quiet=False, stream=None):
        self.write, self.quiet = write, quiet
        self.stream = stream or sys.stdout
        self.path = os.path.join(out_dir, "log.jsonl") if out_dir else None
        self._file = None
        self._start = time.time()
        if write and self.path:
            os.makedirs(out_dir, exist_ok=True)
            self._file = open(self.path, "w")
        self._emit(dict(header, type="config"))
        if write and not quiet:
            policy = header.get("policy", "")
            print(f"cclz.train: {header['preset']} GPT, {header['parameters'] / 1e6:.2f}M "
                  f"parameters, tp={header['tp']} pp={header['pp']} dp={header['dp']} on "
                  f"{header['world']} {header['device']} rank(s); policy {policy}; "
                  f"{header['steps']} steps of {header['tokens_per_step']} tokens"
                  + (f"; log: {self.path}" if self.path else ""), file=self.stream, flush=True)

    def _emit(self, record):
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def step(self, record, total_steps):
        """record: step, tokens, loss, tokens_per_s, and optionally val_loss, wire_raw_bytes,
        wire_sent_bytes (per step), overlap_serial_share, peak_mem_gb."""
        if not self.write:
            return
        self._emit(dict(record, type="step"))
        if self.quiet:
            return
        parts = [f"step {record['step']:>{len(str(total_steps))}}/{total_steps}",
                 f"loss {record['loss']:.4f}"]
        if record.get("val_loss") is not None:
            parts.append(f"val {record['val_loss']:.4f}")
        parts.append(f"{_si(record['tokens_per_s'])} tok/s")
        raw, sent = record.get("wire_raw_bytes"), record.get("wire_sent_bytes")
        if raw and sent < raw:
            parts.append(f"off the wire {_bytes(raw - sent)}/step ({1 - sent / raw:.0%})")
        if record.get("overlap_serial_share") is not None:
            parts.append(f"overlapped calls run serially {record['overlap_serial_share']:.0%}")
        if record.get("peak_mem_gb") is not None:
            parts.append(f"peak {record['peak_mem_gb']:.1f} GB "
                         f"(device {record['device_used_gb']:.1f} GB)")
        print(" | ".join(parts), file=self.stream, flush=True)

    def close(self, summary):
        if self.write:
            self._emit(dict(summary, type="summary", wall_s=time.time() - self._start))
            if not self.quiet:
                print(f"cclz.train: done in {time.time() - self._start:.0f} s"
                      + (f"; log: {self.path}" if self.path else ""), file=self.stream,
                      flush=True)
        if self._file is not None:
            self._file.close()
            self._file = None


def read(path):
    """(header, steps, summary) of a run folder or log.jsonl file."""
    if os.path.isdir(path):
        path = os.path.join(path, "log.jsonl")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such run log (a run folder holds log.jsonl)")
    header, steps, summary = None, [], None
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            kind = r.get("type")
            if kind == "config":
                header = r
            elif kind == "step":
                steps.append(r)
            elif kind == "summary":
                summary = r
    if header is None:
        raise ValueError(f"{path}: no config line; is it a cclz.train log?")
    return header, steps, summary
