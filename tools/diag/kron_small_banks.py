"""Bank-conflict model of the small-factor forward (src/kron/kron_small.h), no GPU needed.

For every mix of square factors with p in {4, 8, 16, 32} and 1024 <= N <= 8192, and every pass
(mode t, stride s): the shared-memory wavefronts per warp access of the scalar reads/writes (s > 1)
and of the 16-byte vector accesses along a fiber (s = 1, per quarter warp), with the XOR swizzle
small_swz and the lane -> fiber map of small_pass. Prints the mixes with a conflict (worst
wavefronts per access above 1) and the table cases. Usage: python tools/diag/kron_small_banks.py"""
import itertools
def h(r): return (r & 7) ^ (((r >> 3) & 1) << 2)
def phys(e):  # float index -> swizzled float index
    r = e >> 5; c = e & 31
    return (r << 5) | ((c & 3) | ((((c >> 2) ^ h(r)) & 7) << 2))
def wavefronts_scalar(addrs):
    banks = {}
    for a in addrs: banks.setdefault(a & 31, set()).add(a)
    return max(len(v) for v in banks.values())
def wavefronts_vec4(addrs):  # per quarter warp, 16-byte accesses: conflicts within 8 lanes
    tot = 0
    for q in range(4):
        ch = {}
        for a in addrs[8*q:8*q+8]: ch.setdefault((a >> 2) & 7, set()).add(a >> 2)
        tot += max(len(v) for v in ch.values())
    return tot / 4  # 1.0 = ideal
def check(ps, E=32):
    N = 1
    for p in ps: N *= p
    T = N // E; W = T // 32
    worst = {}
    for t in range(len(ps)):
        P = ps[t]; s = 1
        for u in ps[t+1:]: s *= u
        V = E // P
        G = N // P // 32
        w1 = 1.0
        for g in range(G):
            for a in range(P):
                addrs = []
                for l in range(32):
                    f = 32 * g + l
                    hi, lo = divmod(f, s)
                    if s == 1:
                        e = f * P + (a // 4) * 4  # vector read a//4
                    else:
                        e = hi * P * s + a * s + lo
                    addrs.append(phys(e))
                if s == 1:
                    w = wavefronts_vec4(addrs)
                else:
                    w = wavefronts_scalar(addrs)
                w1 = max(w1, w)
        worst[(t, P, s)] = w1
    return N, worst
if __name__ == "__main__":
    bad = 0
    for n in range(2, 5):
        for ps in itertools.product([4, 8, 16, 32], repeat=n):
            N = 1
            for p in ps: N *= p
            if not (1024 <= N <= 8192): continue
            N, w = check(list(ps))
            m = max(w.values())
            if m > 1: bad += 1; print(ps, N, {k: v for k, v in w.items() if v > 1})
    print("mixes with a conflict:", bad)
    for ps in [(8, 8, 8, 8), (16, 16, 16), (32, 32), (8, 16, 32), (16, 8, 8)]:
        print(ps, check(list(ps)))
