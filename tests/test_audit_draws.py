"""How the Monte Carlo audit spends its draws (issue #54, the lottery's speed): the
search's screening, each seller's own confirmation stages, and the detectable gain
still true under both."""

from __future__ import annotations

import numpy as np

from market_sim.auditing import audit
from market_sim.auditing.evaluate import _MonteCarlo
from market_sim.auditing.montecarlo import _NAMES, _next_draws
from market_sim.auditing.search import _SCREEN_Z, _screened
from market_sim.mechanisms.base import Mechanism

SEEDS = (0, 1)


class _QuietLottery(Mechanism):
    """eps = 1 - r on U[0, 1] with Myerson's payment r eps + (1 - r)^2 / 2, plus
    0.02 (r - 0.5) N (one standard normal N per call): E[u_c(z)] - E[u_c(c)] =
    -(z - c)^2 / 2 (IC and IR in expectation); per draw the gain is that plus
    0.02 (z - c) N, so a report far from the cost shows its loss on any 4 draws."""

    randomized = True

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        eps = 1.0 - r
        return eps, r * eps + 0.5 * eps**2 + 0.02 * (r - 0.5) * rng.standard_normal()


def _brute(mech, costs, i, z, seed):
    """Seller i's utility at its cost reporting z, the others truthful, on the
    generator ``default_rng(seed)`` (what draw ``seed`` of the search sees)."""
    trial = costs.copy()
    trial[i] = z
    eps, pay = mech.outcome(trial, np.random.default_rng(seed))
    return pay[i] - costs[i] * eps[i]


def _still_in_by_hand(diff, r0):
    """The screening's rule from the gains per draw (NaN: not drawn), by hand."""
    n = np.sum(~np.isnan(diff), axis=0)
    g = np.nanmean(diff, axis=0)
    s = np.nanstd(diff, axis=0, ddof=1) / np.sqrt(n)
    keep = g + _SCREEN_Z * s >= np.maximum((g - _SCREEN_Z * s).max(axis=1), 0)[:, None]
    keep |= s == 0
    keep[:, 0] = True
    keep[:, r0:] |= g[:, r0:] + _SCREEN_Z * s[:, r0:] >= 0  # random reports: could gain
    return keep


def test_the_screening_spends_the_later_draws_only_where_the_choice_can_change():
    """Every candidate gets the first quarter of the draws; the next quarter and then
    the last half go to the truth, the candidates whose UCB reaches max(0, the best
    LCB) (or whose gain did not vary) and the random reports whose UCB reaches 0, each
    judged on all the draws it got; the others get none more (NaN).  Every utility
    drawn is the one a fresh ``default_rng(seed)`` gives (brute force); the reports far
    from the cost (a loss of 0.045 and more against a noise of at most 0.006 |N|) are
    screened out at once, random ones (0.7 at a cost of 0.3, 0.2 at 0.6) too, a random
    report near the cost (0.31 at 0.3) is kept, and a report nearer (0.35 at 0.3: a
    loss of 0.00125 against a noise of 0.001 |N|) goes at the second round."""
    mech, costs = _QuietLottery(), np.array([0.3, 0.6])
    seeds = list(range(100, 116))
    Z = np.array([[0.3, 0.0, 1.0, 0.32, 0.9, 0.35, 0.31, 0.7],
                  [0.6, 0.0, 1.0, 0.58, 0.1, 0.55, 0.2, 0.4]])  # fmt: skip
    U, _ = _screened(_MonteCarlo(mech, costs, costs, seeds), np.arange(2), Z, 6)
    want = np.array([[[_brute(mech, costs, i, z, s) for z in Z[i]] for i in range(2)]
                     for s in seeds])  # fmt: skip
    drawn = ~np.isnan(U)
    assert np.array_equal(U[drawn], want[drawn])
    assert drawn[:4].all()  # the screening: every candidate, 4 draws
    diff = want - want[:, :, :1]
    keep1 = _still_in_by_hand(diff[:4], 6)
    assert np.array_equal(drawn[4:8].all(axis=0), keep1) and not drawn[4:8][:, ~keep1].any()
    keep2 = keep1 & _still_in_by_hand(np.where(drawn[:8], diff[:8], np.nan), 6)
    assert np.array_equal(drawn[8:].all(axis=0), keep2) and not drawn[8:][:, ~keep2].any()
    assert not keep1[:, 1:3].any() and not keep1[:, 4].any()  # 0, 1 and the far report
    assert keep2[0, 6] and not keep1[0, 7] and not keep1[1, 6]  # random: 0.31 kept, 0.7, 0.2 not
    assert keep1[0, 5] and not keep2[0, 5]  # 0.35 at 0.3: the second round


class _HiddenPrize(Mechanism):
    """eps = 1 - r on U[0, 1] with Myerson's payment, plus a prize of 1 to every seller
    reporting >= 0.9 when the call's uniform draw u < 1/4.  Cost 0.8 reporting 0.95
    gains 0.25 - 0.15^2 / 2 = 0.23875 in expectation (not IC); on draws without the
    prize it loses 0.01125 exactly, with no variance."""

    randomized = True

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        eps = 1.0 - r
        prize = (rng.random() < 0.25) * (r >= 0.9)
        return eps, r * eps + 0.5 * eps**2 + prize


def test_a_gain_the_screening_draws_did_not_show_is_not_screened_out():
    """On 4 screening draws without the prize the report 0.95 of a seller of cost 0.8
    shows a loss and no variance: it bounds nothing, so the report keeps all 16 draws
    (and its mean over them shows the prize's gain)."""
    mech, costs = _HiddenPrize(), np.array([0.8, 0.5])
    no_prize = [s for s in range(200) if np.random.default_rng(s).random() >= 0.25]
    prize = [s for s in range(200) if np.random.default_rng(s).random() < 0.25]
    seeds = no_prize[:4] + prize[:6] + no_prize[4:10]  # the prize on 6 of the last 12
    Z = np.array([[0.8, 0.95, 0.0, 0.3], [0.5, 0.95, 0.0, 0.3]])
    U, _ = _screened(_MonteCarlo(mech, costs, costs, seeds), np.arange(2), Z, 4)
    assert not np.isnan(U[:, 0, 1]).any()  # kept: all 16 draws
    gain = U[:, 0, 1] - U[:, 0, 0]
    assert np.allclose(gain[:4], -(0.15**2) / 2) and gain.mean() > 0.3


def test_each_seller_escalates_by_its_own_bounds():
    """The next stage's draws per seller: 0 when settled or at the cap, else what its
    own unsettled bounds want, between 2x and 4x its draws so far (one seller's heavy
    tail does not set the others' draws)."""
    n = 4
    samples = {q: [np.zeros(64)] * n for q in _NAMES}
    samples["top"] = [np.zeros(64), np.zeros(256), np.zeros(64), np.zeros(1000)]
    need = {q: np.zeros(n, dtype=bool) for q in _NAMES}
    need["top"][:] = True
    need["gain"][2] = True
    wanted = np.array([100.0, np.inf, 200.0, 5000.0])
    more = _next_draws(need, wanted, samples, cap=1024)
    # seller 0: 2x 64 (it wants 100); 1: 4x 256 capped at 1024; 2: 200; 3: capped
    assert more.tolist() == [64, 768, 136, 24]
    need["top"][1] = need["top"][3] = False
    assert _next_draws(need, wanted, samples, cap=1024).tolist() == [64, 0, 136, 0]
    assert _next_draws(need, wanted, {q: [np.zeros(1024)] * n for q in _NAMES}, 1024).sum() == 0


class _UnevenStep(Mechanism):
    """No allocation; a report above 0.5 is paid g + s_i N_i (N_i a standard normal
    per seller and call, s_0 = 1, the others 0.25).  A seller of cost c < 0.5 gains
    exactly g in expectation by reporting above 0.5: IC iff g = 0; IR (E u = g >= 0 or
    0).  The sellers' payments vary unevenly, so their confirmations escalate to
    different sizes."""

    randomized = True

    def __init__(self, g):
        self.g = g

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        s = np.where(np.arange(r.size) == 0, 1.0, 0.25)
        return np.zeros(r.size), (r > 0.5) * (self.g + s * rng.standard_normal(r.size))


def test_the_printed_detectable_gain_is_true_when_sellers_escalate_unevenly():
    """g = 0 prints a detectable gain G (the confirmation escalating per seller, the
    search screening); a gain of G at every seller's best report is then confirmed on
    two seeds, as the sentence claims."""
    kw = dict(n_grid=5, n_random=4, refine=False, max_profile_sellers=0, max_others=2,
              n_draws=8, n_confirm=64, n_confirm_max=512)  # fmt: skip
    s0 = audit(_UnevenStep(0.0), "uniform:0:1", 4, 2, np.random.default_rng(0), **kw).summary
    assert s0["verdict"] != "not_ic" and s0["detectable_gain"] > 0
    assert s0["confirm_draws_max"] > 64  # it escalated
    for seed in SEEDS:
        res = audit(_UnevenStep(s0["detectable_gain"]), "uniform:0:1", 4, 2,
                    np.random.default_rng(seed), **kw)  # fmt: skip
        assert res.summary["verdict"] == "not_ic", res.summary["statement"]


class _OneGainer(Mechanism):
    """No allocation (eps = 0); every seller is paid 1, and a report above 0.5 is paid
    g + 0.01 N_i more (N_i one standard normal per seller and call).  Only a seller of
    cost below 0.5 can gain: reporting above 0.5 gains exactly g in expectation (with
    common draws its gain per draw is g + 0.01 N_i), any report of at most 0.5 nothing.
    A seller of cost above 0.5 loses g by reporting below it.  IC iff g = 0; IR always
    (E u = 1 or 1 + g at the truth, eps = 0)."""

    randomized = True

    def __init__(self, g):
        self.g = g

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        return np.zeros(r.size), 1.0 + (r > 0.5) * (self.g + 0.01 * rng.standard_normal(r.size))


def test_a_gain_at_the_printed_detectable_gain_is_confirmed_in_95_percent_of_runs():
    """The default design (64 fresh draws, escalated per seller, 4 Bonferroni stages).
    g = 0 prints G = max over sellers of tol + (k + 1.645) SE; with one seller (cost
    0.25) gaining exactly G, the sentence claims a confirmation with probability >= 95%.
    Here the gain's sample settles at its first stage (k SE < the resolution), so that
    probability is the normal one, about 95% and no more: over 60 seeds the count of
    ``not_ic`` is Binomial(60, >= 0.95), below 53 with probability < 1% (it would be at
    least 53 with probability < 2% if the truth were 75%)."""
    from scipy import stats

    costs = np.array([[0.25, 0.75, 0.8]])
    kw = dict(n_grid=5, n_random=4, refine=False, max_profile_sellers=0, max_others=2,
              costs=costs)  # fmt: skip
    s0 = audit(_OneGainer(0.0), "uniform:0:1", 3, 1, np.random.default_rng(0), **kw).summary
    G = s0["detectable_gain"]
    assert s0["verdict"] == "ic" and 1e-4 < G < 0.01, s0["statement"]
    assert s0["confirm_draws_max"] == 64  # settled at the first stage: the sharp case
    found = [audit(_OneGainer(G), "uniform:0:1", 3, 1, np.random.default_rng(100 + s),
                   **kw).summary["verdict"] == "not_ic" for s in range(60)]  # fmt: skip
    assert stats.binom.cdf(52, 60, 0.95) < 0.01 and stats.binom.sf(52, 60, 0.75) < 0.02
    assert sum(found) >= 53, sum(found)


def test_a_monte_carlo_ic_states_what_its_draws_excluded_not_more():
    """One seller (cost 0.25) gains exactly 1e-4 at every report above 0.5 (``_OneGainer``),
    10^8 times its tol (1e-12 of its payment 1: eps = 0) and 60 times below the
    detectable gain: the audit cannot confirm it and says ``ic``.  Its statement must not
    claim that no seller gains more than its tol, nor that few random reports do (half
    of seller 0's do); it says what was confirmed, what the family-wise bounds exclude
    (a gain above tol + 1% of the scale, 0.01: true) and the detectable gain."""
    costs = np.array([[0.25, 0.75, 0.8]])
    kw = dict(n_grid=5, n_random=4, refine=False, max_profile_sellers=0, max_others=2,
              costs=costs)  # fmt: skip
    s = audit(_OneGainer(1e-4), "uniform:0:1", 3, 1, np.random.default_rng(0), **kw).summary
    assert s["verdict"] == "ic" and s["ir_verdict"] == "ir"
    assert s["tol"] < 1e-11 and s["detectable_gain"] > 60 * 1e-4
    text = s["statement"]
    assert "no seller gains more than" not in text and "random reports gain more" not in text
    assert "no gain above its tolerance" in text and "confirmed on fresh draws" in text
    assert "at 95% family-wise none larger than its tol + 1% of its own incentive scale" in text
    assert f"would have confirmed a gain of {s['detectable_gain']:.3g}" in text


def test_a_deterministic_mechanism_whose_sums_differ_in_the_last_bits_is_not_refused():
    """The undeclared-randomness probe compares two answers to the same reports up to
    float rounding: threads summing in another order change the last bits of a
    deterministic mechanism, which no audit tolerance can see (1e-9 relative); a noise of
    1e-6 of the payments is refused."""
    from market_sim.auditing.evaluate import _same_answer

    pay = np.array([0.0, 0.25, 1.5, 3.0])
    assert _same_answer(pay, pay * (1 + 1e-15) + np.array([1e-17, 0, 0, 0]))
    assert not _same_answer(pay, pay + np.array([0, 1e-6, 0, 0]))
    assert not _same_answer(pay, pay[:3])
    assert _same_answer(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
