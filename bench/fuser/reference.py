"""Reference implementation of Cupcake's fusion search, from
shared/specs/seed-cupcake-gemini.md appendix F (the executable spec that
produced its golden numbers): the timeline of A.3, the exact Pareto DP and
Algorithm 5.1 with the spec's fixes. bench.py times it against fuser."""
import math


class Prob:
    def __init__(s, sizes, B, A, ag, bg, ah, bh):
        s.N = len(sizes); s.A = A; s.ag, s.bg, s.ah, s.bh = ag, bg, ah, bh
        s.ps = [0]; s.pb = [0]
        for x in sizes: s.ps.append(s.ps[-1] + x)
        for b in B: s.pb.append(s.pb[-1] + b)

    def size(s, i, j): return s.ps[j + 1] - s.ps[i] if j >= i else 0
    def Bsum(s, i, j): return s.pb[j + 1] - s.pb[i] if j >= i else 0
    def h(s, i, j): return 0.0 if j < i else s.ah + s.bh * s.size(i, j)
    def g(s, i, j): return 0.0 if j < i else s.ag + s.bg * s.size(i, j)

    def state(s, groups):
        c = e = 0.0
        for (i, j) in groups:
            c += s.Bsum(i, j) + s.h(i, j); e = max(c, e) + s.g(i, j)
        return c, e

    def f(s, groups): return s.A + s.state(groups)[1]


def pareto(p):
    N = p.N; fr = [[] for _ in range(N + 1)]; fr[0] = [(0.0, 0.0, [])]
    for k in range(N):
        nd = []; be = math.inf
        for c, e, gr in sorted(fr[k], key=lambda t: (t[0], t[1])):
            if e < be - 1e-12: nd.append((c, e, gr)); be = e
        for c, e, gr in nd:
            for i in range(k, N):
                c2 = c + p.Bsum(k, i) + p.h(k, i); fr[i + 1].append((c2, max(c2, e) + p.g(k, i), gr + [(k, i)]))
    b = min(fr[N], key=lambda t: t[1]); return p.A + b[1], b[2]


class Alg51:
    def __init__(s, p): s.p = p; s.gt = math.inf; s.gf = None; s.calls = 0

    def run(s):
        for k in range(1, s.p.N + 1):
            M = [(0, k - 1)]
            if k == s.p.N:
                t = s.p.f(M)
                if t < s.gt: s.gt, s.gf = t, M
            else: s.find(M, k)
        return s.gt, s.gf

    def find(s, M, k):
        s.calls += 1
        p = s.p; N = p.N
        if k == N: return []
        loc = [(k, N - 1)]; lt = p.f(M + loc)
        if lt < s.gt: s.gt, s.gf = lt, M + loc
        comp, e = p.state(M); delay = e - comp; js = k
        for i in range(k, N):
            if p.Bsum(k, i) + p.h(k, i) <= delay: js = i
            else: break
        for i in range(js, N):
            base = p.Bsum(k, N - 1) + p.h(k, i) + p.h(i + 1, N - 1)
            cases = max(p.Bsum(k, i) + p.h(k, i), delay) + p.g(k, i) + p.g(i + 1, N - 1)
            if p.A + comp + max(base, cases) > s.gt: continue
            cur = [(k, i)] + s.find(M + [(k, i)], i + 1); ct = p.f(M + cur)
            if ct < lt: loc, lt = cur, ct
            if ct < s.gt: s.gt, s.gf = ct, M + cur
        return loc
