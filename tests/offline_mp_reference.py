"""An independent high-precision reference for the offline mechanism's allocation and
Myerson payments (Eq. 8, 11, 13, 003), in mpmath: used by tests/test_offline_zero.py.

Nothing here comes from ``market_sim``'s solver.  For fixed eta, Eq. 11's KKT points are
a_j = (lam - x_j)^+ / W (Eq. 13), so the optimum lies on the one-parameter family lam >
min x, with G = sum ((lam - x)^+)^2, W = sum (lam - x)^+ and, after the best eta =
sqrt(sigma / x.a), loss(lam) = mu sqrt(G) / W + 2 sqrt(sigma x.a), x.a = lam - G / W.
Its derivative is (W^2 - N G) / W^2 (mu / sqrt(G) - sqrt(sigma / x.a)) (N active
sellers), so its stationary points are the zeros of lam W - s G W - G (s = sigma / mu^2;
Eq. 14).  On each active set {the n lowest values}, of mean M and variance V, lam = M + u
gives W = n u, G = n (u^2 + V) and the depressed cubic s n u^3 + (s n V - M) u + V = 0,
solved in closed form (its coefficients from the centred values, so a tiny M keeps its
digits).  With w0 >= 1 values 0 the infimum mu / sqrt(w0) is approached as lam ->
0+ (a uniform on them, eta -> inf): the zero-cost limit wins when no stationary point
is below it.  Virtual costs come from the laws' closed forms (Beta: mpmath's betainc).
"""

from __future__ import annotations

import mpmath as mp

DPS = 20


def _real_roots(p, q):
    """Real roots of the depressed cubic u^3 + p u + q: trigonometric form (three real
    roots) or Cardano's (one)."""
    disc = (q / 2) ** 2 + (p / 3) ** 3
    cbrt = lambda y: mp.sign(y) * mp.cbrt(abs(y))  # noqa: E731  (the real cube root)
    if p == 0:
        return [cbrt(-q)]
    if disc > 0:
        r = mp.sqrt(disc)
        return [cbrt(-q / 2 + r) + cbrt(-q / 2 - r)]
    k = 2 * mp.sqrt(-p / 3)
    th = mp.acos(max(-1, min(1, 3 * q / (p * k)))) / 3
    return [k * mp.cos(th - 2 * mp.pi * j / 3) for j in range(3)]


def optimum(values, mu=1, sigma=1):
    """(loss, (lam, W, x.a) or "limit") of Eq. 11 over the family, values in mpf."""
    xs = sorted(values)
    s = mp.mpf(sigma) / mp.mpf(mu) ** 2
    w0 = sum(1 for v in xs if v == 0)
    best = (mp.mpf(mu) / mp.sqrt(w0), "limit") if w0 else (mp.inf, None)
    for n in range(1, len(xs) + 1):
        lo, hi = xs[n - 1], (xs[n] if n < len(xs) else mp.inf)
        if not hi > lo:
            continue
        active = xs[:n]
        M = mp.fsum(active) / n
        V = mp.fsum((v - M) ** 2 for v in active) / n
        # lam W - s G W - G = 0 with lam = M + u, W = n u, G = n (u^2 + V)
        for u in _real_roots((s * n * V - M) / (s * n), V / (s * n)):
            lam = M + u
            if not (u > 0 and lo < lam <= hi):
                continue
            W, G = n * u, n * (u * u + V)
            xa = M - V / u  # = lam - G / W, without its cancellation when M << lam
            if xa > 0:
                loss = mu * mp.sqrt(G) / W + 2 * mp.sqrt(sigma * xa)
                if loss < best[0]:
                    best = (loss, (lam, W, xa))
    return best


def eps_of(values, i, mu=1, sigma=1):
    """(eps_i, signature): signature names the optimum's piece (its lam's segment)."""
    _, opt = optimum(values, mu, sigma)
    if opt == "limit":
        return (mp.inf if values[i] == 0 else mp.mpf(0)), ("limit",)
    lam, W, xa = opt
    e = mp.sqrt(sigma / xa) * max(lam - values[i], 0) / W
    return e, (sum(1 for v in values if v < lam), e > 0)


def virtual_cost(spec: str):
    """psi(c) = c + F(c) / f(c) in mpmath for "uniform:a:b" and "beta:al:be:lo:hi"."""
    kind, *args = spec.split(":")
    nums = [mp.mpf(a) for a in args]
    if kind == "uniform":
        a, _ = nums
        return lambda c: 2 * mp.mpf(c) - a
    al, be, lo, hi = nums
    w = hi - lo

    def psi(c):
        x = (mp.mpf(c) - lo) / w
        if x == 0:
            return lo
        if x == 1:  # the density is 0 at the top: psi = +inf, never bought
            return mp.inf
        F = mp.betainc(al, be, 0, x, regularized=True)
        f = x ** (al - 1) * (1 - x) ** (be - 1) / mp.beta(al, be) / w
        return mp.mpf(c) + F / f

    return psi


def _allocation(spec: str, reports, i: int, mu, sigma):
    """z -> (eps_i, signature) with the others at ``reports`` (call inside workdps)."""
    psi = virtual_cost(spec)
    vals = [psi(r) for r in reports]

    def at(z):
        v = list(vals)
        v[i] = psi(z)
        return eps_of(v, i, mu, sigma)

    return at


def payment(spec: str, reports, i: int, top: float, mu=1, sigma=1) -> float:
    """t_i = r_i eps_i(r_i) + int_{r_i}^{top} eps_i(z) dz (Eq. 8, 003; 0 x inf = 0), the
    integral by mpmath's tanh-sinh quadrature on the pieces between the changes of the
    optimum's segment (found by bisection from a grid geometric near r_i, to 1e-18)."""
    with mp.workdps(DPS):
        at = _allocation(spec, reports, i, mu, sigma)
        r_i, top = mp.mpf(reports[i]), mp.mpf(top)
        w = top - r_i
        grid = [r_i] + [r_i + w * mp.mpf(10) ** k for k in range(-24, 0)]
        grid += [r_i + w * mp.mpf(j) / 40 for j in range(1, 41)]
        grid = sorted(set(grid))
        cuts = [r_i]
        sig = [at(z)[1] for z in grid]
        for a, b, sa, sb in zip(grid[:-1], grid[1:], sig[:-1], sig[1:], strict=True):
            if sa != sb:
                while b - a > mp.mpf(10) ** -18 * (1 + abs(b)):
                    m = (a + b) / 2
                    a, b = (m, b) if at(m)[1] == sa else (a, m)
                cuts.append((a + b) / 2)
        edges = sorted(set(cuts + [top]))
        # pieces past the point where seller i is no longer bought add 0
        pieces = [(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)
                  if at((a + b) / 2)[0] > 0]  # fmt: skip
        tail = mp.fsum(mp.quad(lambda z: at(z)[0], [a, b]) for a, b in pieces)
        e0 = at(r_i)[0]
        return float((0 if e0 == mp.inf else r_i * e0) + tail)


def integral(spec: str, reports, i: int, a: float, b: float, mu=1, sigma=1) -> float:
    """int_a^b eps_i(z) dz by tanh-sinh, for [a, b] inside one piece (the caller's
    claim, checked: the optimum's segment is the same at both ends and the middle)."""
    with mp.workdps(DPS):
        at = _allocation(spec, reports, i, mu, sigma)
        a, b = mp.mpf(a), mp.mpf(b)
        ends = {at(z)[1] for z in (a + (b - a) * mp.mpf(10) ** -12, (a + b) / 2, b)}
        assert len(ends) == 1, "not one piece"
        return float(mp.quad(lambda z: at(z)[0], [a, b]))
