"""What an audit can certify: Myerson's characterization checked on the reports tried.

Single-parameter procurement (utility t - c eps).  By Myerson's lemma (Lemma III.2
and Eq. 8, 003) a deterministic mechanism is truthful iff, for every seller i and
every fixed r_-i,

* (M) eps_i(r) is non-increasing in the own report r, and
* (P) t_i(r) = r eps_i(r) + int_r^{c_max} eps_i(z) dz + h_i(r_-i), with h_i not
  depending on r.

:func:`myerson_check` tests (M) and (P) on finitely many own reports per seller.
Write u(r) = t(r) - r eps(r) (the truthful utility at cost r).  For candidates
z_1 < ... < z_K of one seller, (P) says u(z_j) - u(z_j+1) = int_{z_j}^{z_j+1} eps;
the integral is unknown between candidates, but for ANY non-increasing eps
through the observed points it lies in the bracket

    [eps(z_j+1) (z_j+1 - z_j),  eps(z_j) (z_j+1 - z_j)]                  (B)

and every value of the bracket is attained (a step at either end), independently
per interval.  The residual of a seller is the smallest possible violation of (P)

    delta = min over non-increasing eps through the points, and over h, of
            max_j |u(z_j) - int_{z_j}^{c_max} eps - h|,

which has the closed form (a chain of difference constraints: the constraint graph
has a negative cycle iff some pair a < b breaks it)

    2 delta = max(0, max_{a<b} [S^L_ab - (u_a - u_b)], max_{a<b} [(u_a - u_b) - S^U_ab])

with S^L_ab, S^U_ab the sums of the lower / upper brackets (B) from z_a to z_b:
a running minimum / maximum of u plus the cumulative brackets, O(K) per seller and
vectorised over sellers.  delta = 0 iff the observations are consistent with (P);
delta > 0 PROVES that (P) fails (no monotone eps and no h explain the payments),
up to the floating-point error of the payments themselves (hence ``rtol``).
Because h is free, the tail above the largest candidate z_K (whose integral lies
in [0, eps(z_K)(c_max - z_K)]) cannot matter for (P); it does pin the
library's normalisation h = 0 (a seller at c_max earns nothing above its cost,
the least IR payment): ``identity_residual_h0_max`` is the same minimum with
h = 0 imposed, the tail bracket included.  Where eps rises by more than
``mono_tol`` x the largest eps (M fails), (B) is replaced by the order-free hull
[min, max] x width, and the check fails on (M).  A report tried twice has a bracket
of width 0: its eps must agree (else a violation of (M)) and so must u.

Certification.  No finite check proves IC: the payment identity can fail between
any two reports tried (a bonus in a window narrower than the candidates' spacing).
:func:`certification` therefore certifies only the library's own offline and online
mechanisms, whose allocations are proved monotone for every report and whose
payments the library computes by (P) (h = 0), and only when the check on the
reports tried found (M) and (P) to hold; see its docstring.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .errors import MarketSimError
from .mechanisms.myerson import Violation
from .privacy.limit import privacy_cost

__all__ = [
    "MyersonCheck",
    "myerson_check",
    "certification",
    "certificate_note",
    "certified_classes",
    "unmodified",
    "state_fingerprint",
    "CERTIFIED",
]

CERTIFIED = "monotone allocation + Myerson payments"


@dataclass(frozen=True)
class MyersonCheck:
    """Result of :func:`myerson_check` (module doc for the meaning of each number).

    ``monotone``: no rise of eps in the own report larger than ``mono_tol`` x the
    largest eps seen; ``violations``: the largest ``max_listed`` rises (of
    ``n_violations``), biggest first.  ``residuals``: per seller delta (the least
    violation of the payment identity with h free); ``identity_residual_max``
    their max, ``identity_residual_rel`` that over ``payment_scale`` (the largest
    |payment| in the check); ``identity_residual_h0_max`` / ``_h0_rel`` the same with
    h = 0 (the library's normalisation).  ``bracket_width_rel``: the widest single
    bracket (B) over ``payment_scale``, the resolution of the check (a payment off
    by less than its bracket's width at one report can pass).  ``passed``:
    monotone and ``identity_residual_rel <= rtol``."""

    n_sellers: int
    n_candidates: int
    monotone: bool
    n_violations: int
    violations: tuple[Violation, ...]
    residuals: np.ndarray
    identity_residual_max: float
    identity_residual_rel: float
    identity_residual_h0_max: float
    identity_residual_h0_rel: float
    worst_seller: int | None
    payment_scale: float
    bracket_width_rel: float
    mono_tol: float
    rtol: float

    @property
    def identity_holds(self) -> bool:
        return self.identity_residual_rel <= self.rtol

    @property
    def passed(self) -> bool:
        return self.monotone and self.identity_holds

    def summary(self) -> dict:
        """Plain numbers for summary.json."""
        return {
            "monotone": bool(self.monotone),
            "monotonicity_violations": int(self.n_violations),
            "identity_residual_max": float(self.identity_residual_max),
            "identity_residual_rel": float(self.identity_residual_rel),
            "identity_residual_h0_max": float(self.identity_residual_h0_max),
            "identity_residual_h0_rel": float(self.identity_residual_h0_rel),
            "identity_bracket_width_rel": float(self.bracket_width_rel),
            "myerson_check_passed": bool(self.passed),
        }


def _as_table(a, label: str, shape=None, limit_ok=False) -> np.ndarray:
    try:
        out = np.asarray(a, dtype=float)
    except (TypeError, ValueError):
        raise MarketSimError(f"{label} must be an array of numbers") from None
    if out.ndim == 1:
        out = out.reshape(1, -1)
    if out.ndim != 2:
        raise MarketSimError(f"{label} must be an (n_sellers, n_candidates) array")
    if shape is not None and out.shape != shape:
        raise MarketSimError(f"{label} has shape {out.shape}, candidates {shape}")
    if not np.all(np.isfinite(out) | (limit_ok & np.isposinf(out))):
        raise MarketSimError(f"{label} contains NaN or inf")
    return out


def myerson_check(
    candidates,
    eps,
    payments,
    support,
    *,
    sellers=None,
    mono_tol: float = 1e-9,
    rtol: float = 1e-9,
    max_listed: int = 100,
) -> MyersonCheck:
    """Check Myerson's characterization on each seller's candidate own reports.

    ``candidates``, ``eps``, ``payments``: (n, K) arrays, row i = seller i's own
    reports (any order, repeats allowed) and the eps and payment the mechanism gave
    it there, the others' reports fixed.  ``support``: (c_min, c_max) of the costs;
    every candidate must lie in it.  ``sellers``: the sellers' ids for the violation
    list (default 0..n-1).  ``mono_tol``: a rise of eps counts when larger than
    ``mono_tol`` x the largest eps; ``rtol``: the identity holds when the residual
    is at most ``rtol`` x the payment scale.  Exact brackets, no quadrature: see the
    module doc.  Cost O(n K log K), vectorised over sellers."""
    z, e, t, lo, hi, ids = _checked_tables(candidates, eps, payments, support, sellers,
                                           mono_tol, rtol)  # fmt: skip
    n, K = z.shape
    # sort each row by report (one argsort, gathered through flat indices)
    flat = (np.argsort(z, axis=1) + (K * np.arange(n))[:, None]).ravel()
    z, e, t = (a.ravel()[flat].reshape(n, K) for a in (z, e, t))
    n_viol, listed = _monotonicity(z, e, ids, mono_tol, max_listed)
    residuals, res_h0, width = _identity_residuals(z, e, t, hi)
    scale = max(float(np.abs(t).max()), 1e-300)
    worst = int(np.argmax(residuals))
    return MyersonCheck(
        n_sellers=n,
        n_candidates=K,
        monotone=n_viol == 0,
        n_violations=n_viol,
        violations=listed,
        residuals=residuals,
        identity_residual_max=float(residuals[worst]),
        identity_residual_rel=float(residuals[worst]) / scale,
        identity_residual_h0_max=float(res_h0.max()),
        identity_residual_h0_rel=float(res_h0.max()) / scale,
        worst_seller=int(ids[worst]) if residuals[worst] > 0 else None,
        payment_scale=scale,
        bracket_width_rel=width / scale,
        mono_tol=float(mono_tol),
        rtol=float(rtol),
    )


def _checked_tables(candidates, eps, payments, support, sellers, mono_tol, rtol):
    """The (n, K) tables, the support's ends and the sellers' ids, each refused in one
    line when it is not what :func:`myerson_check` takes."""
    z = _as_table(candidates, "candidates")
    e = _as_table(eps, "eps", z.shape, limit_ok=True)
    t = _as_table(payments, "payments", z.shape)
    if np.any(np.isposinf(e) & (z != 0)):
        bad = z[np.isposinf(e) & (z != 0)][0]
        raise MarketSimError(f"eps = +inf at a report of {bad:g} > 0 (only a report of 0 can "
                             "have virtual cost 0, the zero-cost limit)")  # fmt: skip
    n, K = z.shape
    try:
        lo, hi = (float(v) for v in support)
    except (TypeError, ValueError):
        raise MarketSimError("support must be a pair (c_min, c_max)") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise MarketSimError(f"support must be finite with c_min < c_max (got {support!r})")
    if z.size and (z.min() < lo or z.max() > hi):
        bad = z[(z < lo) | (z > hi)][0]
        raise MarketSimError(f"candidate report {bad:g} outside the support [{lo:g}, {hi:g}]")
    if np.any(e < 0):
        raise MarketSimError("eps must be >= 0")
    for label, v in (("mono_tol", mono_tol), ("rtol", rtol)):
        if not (np.isfinite(v) and v >= 0):
            raise MarketSimError(f"{label} must be a finite number >= 0 (got {v!r})")
    ids = np.arange(n) if sellers is None else np.asarray(sellers, dtype=int).reshape(-1)
    if ids.size != n:
        raise MarketSimError(f"sellers has {ids.size} ids for {n} rows of candidates")
    if n == 0 or K == 0:
        raise MarketSimError("myerson_check needs at least one seller and one candidate")
    return z, e, t, lo, hi, ids


def _monotonicity(z, e, ids, mono_tol: float, max_listed: int):
    """(M) on rows sorted by report: eps non-increasing in the own report, and equal at a
    repeated report; (number of violations, the largest ``max_listed`` of them)."""
    limit = np.isposinf(e)  # the zero-cost limit at a report of 0 (sorted first)
    eps_scale = max(float(np.where(limit, 0.0, e).max()), 1e-300)
    with np.errstate(invalid="ignore"):  # inf - inf: two reports of 0, both the limit
        de = np.nan_to_num(np.diff(e, axis=1), nan=0.0, posinf=np.inf, neginf=-np.inf)
    dz = np.diff(z, axis=1)
    rise = (de > mono_tol * eps_scale) | ((dz == 0) & (np.abs(de) > mono_tol * eps_scale))
    n_viol = int(np.count_nonzero(rise))
    listed: tuple[Violation, ...] = ()
    if n_viol:
        r, c = np.nonzero(rise)
        size = np.abs(de[r, c])
        top = np.argsort(-size, kind="stable")[: max(int(max_listed), 0)]
        listed = tuple(
            Violation(int(ids[r[j]]), float(z[r[j], c[j]]), float(z[r[j], c[j] + 1]),
                      *sorted((float(e[r[j], c[j]]), float(e[r[j], c[j] + 1]))))
            for j in top
        )  # fmt: skip
    return n_viol, listed


def _identity_residuals(z, e, t, hi: float):
    """(P) on rows sorted by report: per seller the smallest delta for which payments
    within delta satisfy the identity's brackets (B), the same with v(c_max) = 0 pinned,
    and the widest bracket (module doc)."""
    u = t - privacy_cost(z, e)  # truthful utility at each candidate cost (0 x inf = 0)
    limit = np.isposinf(e)  # the zero-cost limit at a report of 0 (sorted first)
    dz = np.diff(z, axis=1)
    # brackets (B) of int_{z_j}^{z_j+1} eps, the hull where eps rises
    lower = privacy_cost(dz, np.minimum(e[:, 1:], e[:, :-1]))
    upper = privacy_cost(dz, np.maximum(e[:, 1:], e[:, :-1]))
    # the limit: int_0^z eps has no upper bracket (+inf), so the upper constraints from
    # a report of 0 are void; their bracket is left out of the sums and the reports of
    # 0 out of the maxima of f below (pairs a < b with a at the limit)
    open_up = np.isinf(upper)
    upper[open_up] = 0.0
    width = float(np.where(open_up, 0.0, upper - lower).max(initial=0.0))
    # g = u + S^L(z_1 .. z_j), f = u + S^U(z_1 .. z_j): for a < b,
    # S^L_ab - (u_a - u_b) = g_b - g_a and (u_a - u_b) - S^U_ab = f_a - f_b
    n, K = z.shape
    g, f = np.zeros((n, K)), np.zeros((n, K))
    np.cumsum(lower, axis=1, out=g[:, 1:])
    np.cumsum(upper, axis=1, out=f[:, 1:])
    sum_lo, sum_hi = g[:, -1].copy(), f[:, -1].copy()  # S^L, S^U from z_1 to z_K
    g += u
    f += u
    run = np.minimum.accumulate(g, axis=1)
    np.subtract(g, run, out=run)  # largest rise of g so far
    rise_g = run.max(axis=1)
    f_from = np.where(limit, -np.inf, f)  # no upper constraint starts at the limit
    run = np.maximum.accumulate(f_from, axis=1)
    np.subtract(run, f, out=run)  # largest drop of f so far
    residuals = np.maximum(rise_g, run.max(axis=1)) / 2  # delta per seller
    # h = 0 pins v(c_max) = 0, the tail above z_K in [0, eps(z_K)(c_max - z_K)]:
    # v_a >= S^L(z_a .. z_K) = sum_lo - (g_a - u_a), v_a <= sum_hi + tail - (f_a - u_a)
    tail_hi = privacy_cost(hi - z[:, -1], e[:, -1])
    below = sum_lo - g.min(axis=1)  # max_a of (least v_a) - u_a
    above = f_from.max(axis=1) - sum_hi - tail_hi  # max_a of u_a - (largest v_a)
    res_h0 = np.maximum(residuals, np.maximum(below, above).clip(min=0.0))
    return residuals, res_h0, width


def certified_classes() -> tuple[type, ...]:
    """The classes whose allocation the library proves monotone for every report: the
    offline mechanism (the exact optimum of a problem with the term gamma psi(r) eps_i)
    and the online one (eps = scale (lambda - gamma psi(r))+, psi non-decreasing)."""
    from .mechanisms.builtin import OfflineMechanism
    from .mechanisms.online import OnlineMechanism

    return (OfflineMechanism, OnlineMechanism)


def certification(mech, check: MyersonCheck) -> str | None:
    """``CERTIFIED`` ("monotone allocation + Myerson payments") or None.

    Certified iff (1) ``mech`` is deterministic (``randomized`` False), (2) its class
    IS one of :func:`certified_classes` (identity of the class object, not its name or
    ``__module__``, which a user's class can set; a subclass is the user's: it may
    override ``outcome``), and (3) ``check`` passed (monotone on the reports tried,
    identity residual within ``rtol``).

    Why only these: the certificate rests on two facts proved for every report, not
    on the finitely many reports the check saw: the allocation is monotone (a theorem
    for these two allocations) and the payments are computed by (P) from it.
    ``myerson_mechanism`` computes (P), but over a user's allocation whose monotonicity
    is only checked where it is evaluated (a rise inside a window narrower than the
    reports tried is not excluded): :func:`certificate_note` says so instead."""
    if getattr(mech, "randomized", False):
        return None
    if unmodified(mech) is not None:
        return None
    return CERTIFIED if check.passed else None


def unmodified(mech) -> str | None:
    """None when ``mech`` is one of the library's own certified mechanisms, unmodified;
    else why not.  The object is checked, not its class:

    1. its class IS one of :func:`certified_classes` (a subclass may override
       ``outcome``, ``deviations`` or anything they call);
    2. nothing callable is bound on the instance (an ``outcome`` set on the object
       shadows the class's);
    3. its cost law is the library's own: rebuilt from its spec by
       :func:`~market_sim.distributions.parse_distribution` (each class's law alike),
       the rebuilt law has the same state, field by field and array by array, down to
       the scipy distribution it holds.  A law swapped in by ``object.__setattr__``
       (its density with a spike 1e-6 wide: psi dips there, the allocation is not
       monotone), or an array edited in place, differs.  A law that has no spec to
       rebuild it from (an empirical sample, a mixture) is not certified;
    4. the mechanism rebuilt from its public parameters (:func:`_rebuilt`) around the
       same law has the same state: derived numbers (an online cut-off, a threshold,
       a class schedule) set on the object afterwards differ.

    The numbers on the instance (mu, sigma, gamma, k, m) are then parameters the
    theorem holds for (docs/audit-certification.md)."""
    if type(mech) not in certified_classes():
        return f"{type(mech).__qualname__} is not the library's offline or online class"
    for cache in set(vars(mech)) - set(_own_state(mech) or {}):
        del vars(mech)[cache]  # caches are rebuilt on demand: none is trusted from before
    try:
        state = state_fingerprint(mech)
    except RecursionError:
        return "its state is too deeply nested to compare with a fresh instance"
    if state not in _CHECKED:  # an object in this very state was checked before
        if len(_CHECKED) >= 64:
            _CHECKED.pop(next(iter(_CHECKED)))
        _CHECKED[state] = _unmodified_now(mech, state)
    return _CHECKED[state]


# state fingerprint -> ``unmodified``'s answer (a worker's unpickled copy is found too)
_CHECKED: dict[tuple, str | None] = {}


def _unmodified_now(mech, state: tuple) -> str | None:
    """:func:`unmodified`'s items 2-4 for ``mech``, whose state is ``state``."""
    bound = _bound_callables(mech)
    if bound:
        return f"{', '.join(bound)} set on the instance"
    why = _own_law(getattr(mech, "dist", None))
    if why:
        return why
    try:
        fresh = _rebuilt(mech)
    except Exception as exc:  # a state its own constructor refuses is not the library's
        return f"it cannot be rebuilt from its parameters ({exc})"
    if state_fingerprint(fresh) != state:
        return (
            f"its state differs from a fresh {type(mech).__qualname__} with the same "
            "parameters (something was set on it after it was built)"
        )
    return None


def _rebuilt(mech):
    """A fresh instance of ``mech``'s class from its public parameters, same law object."""
    from dataclasses import fields, is_dataclass

    from .mechanisms.online import OnlineMechanism

    if type(mech) is OnlineMechanism:
        return OnlineMechanism(
            mech.dist, mech.m, mu=mech.mu, sigma=mech.sigma, gamma=mech.gamma, rule=mech.rule
        )
    assert is_dataclass(mech)
    return type(mech)(**{f.name: getattr(mech, f.name) for f in fields(mech) if f.init})


def _bound_callables(obj) -> list[str]:
    """Names of callables set on ``obj`` itself (shadowing or adding methods)."""
    return sorted(k for k, v in vars(obj).items() if callable(v))


def _own_law(law) -> str | None:
    """None when ``law`` is the library's own cost law (or per-seller laws of them),
    in the state its spec builds (:func:`unmodified`, item 3)."""
    from .distributions import CostDistribution, SellerLaws

    if type(law) is SellerLaws:
        for sub in law.laws:
            why = _own_law(sub)
            if why:
                return why
        return None if not _bound_callables(law) else "a callable set on the seller laws"
    if type(law) is not CostDistribution:
        return f"its cost law is a {type(law).__qualname__}, not the library's"
    fresh = _law_fingerprint(law.spec)
    if fresh is None:
        return f"its cost law {law.spec!r} cannot be rebuilt from its spec to be checked"
    if fresh != state_fingerprint(law):
        return f"its cost law differs from the law its spec {law.spec!r} builds"
    return None


@functools.lru_cache(maxsize=256)
def _law_fingerprint(spec: str) -> tuple | None:
    """The state of the law ``spec`` builds (None if no law can be built from it)."""
    from .distributions import parse_distribution

    try:
        return state_fingerprint(parse_distribution(spec))
    except MarketSimError:
        return None


def state_fingerprint(obj) -> tuple:
    """A canonical description of ``obj``'s state, equal for two objects exactly when
    their types, numbers (bit for bit), strings and arrays (dtype, shape, bytes) are,
    recursively through lists, tuples, dicts and instance attributes (less the caches
    their ``__getstate__`` leaves out).  Functions are named (module and qualified
    name); a random generator is a generator whatever its state (a parameter of
    nothing); an object shared by two places is described in both; a cycle back to an
    object being described is named by that object's depth."""
    return _fingerprint(obj, {})


def _fingerprint(obj, path: dict[int, int]):
    """``state_fingerprint``; ``path``: id -> depth of the objects being described."""
    if obj is None or isinstance(obj, bool | int | float | complex | str | bytes):
        return (type(obj).__name__, repr(obj))  # repr is exact for floats
    if isinstance(obj, np.generic):
        return ("np", obj.dtype.str, obj.tobytes())
    if isinstance(obj, np.random.Generator | np.random.RandomState | np.random.BitGenerator):
        return ("rng",)
    if isinstance(obj, np.ndarray):
        return ("nd", obj.dtype.str, obj.shape, np.ascontiguousarray(obj).tobytes())
    if id(obj) in path:
        return ("cycle", path[id(obj)])
    path[id(obj)] = len(path)
    try:
        return _fingerprint_container(obj, path)
    finally:
        del path[id(obj)]


def _fingerprint_container(obj, path: dict[int, int]):
    if isinstance(obj, list | tuple | frozenset | set):
        items = sorted(obj, key=repr) if isinstance(obj, set | frozenset) else obj
        return (type(obj).__name__, tuple(_fingerprint(x, path) for x in items))
    if isinstance(obj, dict):
        return ("dict", tuple((repr(k), _fingerprint(v, path)) for k, v in obj.items()))
    func = getattr(obj, "__func__", obj)
    if callable(obj) and hasattr(func, "__qualname__") and not hasattr(obj, "__dict__"):
        return ("fn", getattr(func, "__module__", None), func.__qualname__)
    if hasattr(obj, "__code__"):  # a Python function: its name, not its globals
        return ("fn", obj.__module__, obj.__qualname__, _fingerprint(vars(obj), path))
    kind = (type(obj).__module__, type(obj).__qualname__)
    state = _own_state(obj)
    if state is None:
        return ("opaque", *kind, repr(obj))
    return ("obj", *kind, _fingerprint(state, path))


def _own_state(obj) -> dict | None:
    """``obj``'s attributes less what its ``__getstate__`` leaves out (caches, rebuilt on
    demand: they are not state a fresh object must share)."""
    attrs = getattr(obj, "__dict__", None)
    if attrs is None:
        return None
    kept = obj.__getstate__() if hasattr(obj, "__getstate__") else attrs
    return kept if isinstance(kept, dict) else attrs


def certificate_note(mech, n_reports: int) -> str | None:
    """What can be said of a mechanism that pays by (P) but is not certified:
    ``myerson_mechanism`` over a user's allocation (exact class identity)."""
    from .mechanisms.myerson import MyersonMechanism

    if type(mech) is MyersonMechanism:
        return f"Myerson payments; monotonicity checked at {int(n_reports)} reports"
    return None
