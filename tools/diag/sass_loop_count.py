"""Instructions one thread issues per row in the row loops of a kernel's SASS (no device needed),
for the instructions-per-element counts of the block-row norm kernels (norm_cuda.cu, kKeepFloats).

usage: python tools/diag/sass_loop_count.py FILE.sass FUNCTION_REGEX [v]
  FILE.sass: `cuobjdump -sass` of a cubin, e.g.
    nvcc -std=c++17 -O3 --expt-relaxed-constexpr --expt-extended-lambda \
      -gencode=arch=compute_90a,code=sm_90a -I$CUDA_INCLUDE -Iinclude -Isrc \
      -DSPARSEKERN_NORM_VARIANTS -cubin -o /tmp/norm.cubin src/inplace/norm_cuda.cu
    cuobjdump -sass /tmp/norm.cubin > /tmp/norm.sass
  FUNCTION_REGEX: picks the first function whose mangled name matches, e.g.
    'norm_lean_kernelI6__halfLb0ELi4ELi4ELNS2_10AffineFromE1E' (fp16 LayerNorm, LW 4, 4 warps, kLdg)
    'norm_bulk_kernelI6__halfLb0ELi2ELNS2_10AffineFromE1ELi8ELi3E' (the old 8x3)
  v: also print the walked path.
Finds each row loop (a backward branch whose body holds the mbarrier wait and the block barrier)
and walks its hot path: conditional forward branches over cold code (CALL.REL, UBLKCP, I2F: the
64-bit division of RowGeom::offset, thread 0's next bulk copy) are taken; branches out of the loop
(the mbarrier retry) and other conditional branches fall through; unconditional BRA is followed.
Divide the count by the elements a thread holds per row (LW * 8). Kernels with two row loops
(norm_lean_kernel: rows of exactly LW*W words, and shorter rows) print both: the full-row loop
is the one without the fill of words past the row (the smaller count; for the shorter rows the
walk counts every word, including those a warp skips).
"""
import re, sys, collections
f, pat = sys.argv[1], sys.argv[2]
ins, on = [], False
for line in open(f):
    if 'Function : ' in line:
        if on: break
        on = re.search(pat, line) is not None
        if on: print('#', line.split('Function : ')[1].strip()[:160])
        continue
    m = on and re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;', line)
    if m: ins.append((int(m.group(1), 16), m.group(2)))
idx = {a: i for i, (a, _) in enumerate(ins)}
br = re.compile(r'(@!?U?P\w+ )?(BRA(?:\.U\.ANY)?) (0x[0-9a-f]+)')
cold = re.compile(r'CALL\.REL|UBLKCP|I2F|SYNCS\.ARRIVE')
loops = []
for i, (a, t) in enumerate(ins):
    m = br.search(t)
    if m and m.group(1) and int(m.group(3), 16) < a:
        body = ins[idx[int(m.group(3), 16)]: i + 1]
        if any('PHASECHK' in x[1] for x in body) and any('BAR.SYNC' in x[1] for x in body):
            loops.append((int(m.group(3), 16), a))
for head, end in loops:
    i = idx[head]; count = collections.Counter(); path = []
    while True:
        a, t = ins[i]
        m = br.search(t)
        op = t.split()[1] if t.startswith('@') else t.split()[0]
        if m:
            tgt = int(m.group(3), 16); count['BRA'] += 1; path.append((a, t))
            if a == end: break
            if m.group(1) is None: i = idx[tgt]; continue
            if head < tgt <= end + 16 and tgt > a and any(cold.search(x[1]) for x in ins[i + 1: idx[tgt]]):
                i = idx[tgt]; continue
            i += 1; continue
        key = op if op.startswith(('LDS', 'STG', 'STS', 'LDG')) else op.split('.')[0]
        count[key] += 1; path.append((a, t)); i += 1
    tot = sum(count.values())
    print(f"loop {head:04x}-{end:04x}: {tot} per row:", ' '.join(f"{k}={v}" for k, v in count.most_common()))
    if len(sys.argv) > 3:
        for a, t in path: print(f"   {a:04x} {t}")
