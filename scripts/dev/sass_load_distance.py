#!/usr/bin/env python3
"""How far ahead of its first use each global load of a kernel's loops is issued, in SASS
instructions (counting around the loop, so a load used in the next iteration counts the rest of
this one). A load issued only tens of instructions before its use waits on DRAM when the SM is
busy; ptxas sinks loads that way to stay within a register bound, whatever the source says
(the lossless general decoder's raw-plane loads, "a group ahead" in the source, are issued 50-70
instructions before use: docs/kernels/lossless.md, "Decoder").

    nvcc ... -cubin -o k.cubin file.cu          (the build's flags, scripts/dev/profile.sh)
    cuobjdump -sass k.cubin > k.sass            (cuobjdump: the nvidia-cuda-cuobjdump wheel)
    python3 scripts/dev/sass_load_distance.py k.sass decodeGeneralWindowKernelILi9E

The second argument picks the kernel (a piece of its mangled name). Per loop (a backward branch)
with global loads (LDG, LDGSTS): its length, and each load with its distance to the first
instruction that reads the loaded registers (for LDGSTS, which fills shared memory: the next
instruction that reads the address registers, which says little)."""
import re
import sys

INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?) ;")
BRANCH = re.compile(r"BRA (?:`\()?\S*?0x([0-9a-f]+)")


def kernel_instructions(path, name):
    out, inside = [], False
    for line in open(path):
        if "Function :" in line:
            inside = name in line
            continue
        m = INSTRUCTION.match(line) if inside else None
        if m:
            out.append((int(m.group(1), 16), m.group(2).strip()))
    return out


def operands(text):
    """The opcode and the register numbers of an instruction, without its predicate."""
    words = text.split(None, 1)
    if words and words[0].startswith("@"):
        words = words[1].split(None, 1) if len(words) > 1 else []
    if len(words) < 2:
        return (words[0] if words else ""), []
    return words[0], re.findall(r"\bR(\d+)\b", words[1])


def first_use(body, k, registers):
    for d in range(1, len(body) + 1):
        opcode, regs = operands(body[(k + d) % len(body)][1])
        sources = regs if opcode.startswith("ST") else regs[1:]
        if registers & set(sources):
            return d
    return None


def main(path, name):
    code = kernel_instructions(path, name)
    if not code:
        sys.exit(f"no kernel matching {name!r} in {path}")
    index = {address: i for i, (address, _) in enumerate(code)}
    for end, (address, text) in enumerate(code):
        m = BRANCH.search(text)
        if not m or int(m.group(1), 16) >= address or int(m.group(1), 16) not in index:
            continue
        body = code[index[int(m.group(1), 16)]:end + 1]
        loads = [(k, t) for k, (_, t) in enumerate(body) if "LDG" in t]
        if not loads:
            continue
        print(f"loop {body[0][0]:#x}-{address:#x}: {len(body)} instructions, {len(loads)} loads")
        for k, t in loads:
            opcode, regs = operands(t)
            if not regs:
                continue
            width = 4 if ".128" in opcode else 2 if ".64" in opcode else 1
            loaded = {str(int(regs[0]) + q) for q in range(width)}
            print(f"   {t[:60]:<60} first use after {first_use(body, k, loaded)} instructions")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
