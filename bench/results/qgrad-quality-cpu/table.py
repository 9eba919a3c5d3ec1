"""The README's table from the JSON rows that run.sh wrote: per tensor, NMSE and max relative
error for int8/int4/int2 (bf16 input; fp32 input of the same values gives the same codes) and the
wire ratios vs bf16 and fp32."""
import json

rows = {}
for bits in (8, 4, 2):
    for dtype in ("bf16", "fp32"):
        for r in json.load(open(f"qgrad_int{bits}_{dtype}.json")):
            rows[(r["tensor"], bits, dtype)] = r
tensors = sorted({t for (t, _, _) in rows}, key=lambda t: ("grad_w" not in t, t))
print("| tensor | int8 NMSE | int4 NMSE | int2 NMSE | int8 maxrel | int4 maxrel | int2 maxrel |"
      " within bound |")
print("|---|---|---|---|---|---|---|---|")
for t in tensors:
    nm = [rows[(t, b, "bf16")]["nmse"] for b in (8, 4, 2)]
    mr = [rows[(t, b, "bf16")]["max_rel_err"] for b in (8, 4, 2)]
    ok = all(rows[(t, b, d)]["within_bound"] for b in (8, 4, 2) for d in ("bf16", "fp32"))
    name = f"**{t}**" if "grad_w" in t else t
    print(f"| {name} | " + " | ".join(f"{v:.3e}" for v in nm) + " | " +
          " | ".join(f"{v:.3e}" for v in mr) + f" | {'yes' if ok else 'NO'} |")
print()
print("| bits | ratio vs bf16 (all tensors) | bytes / bf16 bytes | ratio vs fp32 |"
      " NMSE with fp32 output / bf16 output (range over tensors) |")
print("|---|---|---|---|---|")
for b in (8, 4, 2):
    def overall(d):
        raw = sum(rows[(t, b, d)]["bytes"] for t in tensors)
        enc = sum(rows[(t, b, d)]["encoded_bytes"] for t in tensors)
        return raw / enc
    rel = [rows[(t, b, "fp32")]["nmse"] / rows[(t, b, "bf16")]["nmse"] for t in tensors]
    print(f"| int{b} | {overall('bf16'):.3f}x | {1 / overall('bf16'):.4f} | {overall('fp32'):.3f}x |"
          f" {min(rel):.4f} .. {max(rel):.4f} |")
