"""Heterogeneous-DP logistic regression by objective perturbation (Algorithm 1, 003).

    w = argmin_w  sum_i a_i log(1 + exp(-y_i w.x_i)) + b'.w + (Lambda/2) ||w||^2,
    b' = 2 b / eta,  ||b|| ~ Gamma(d, 1), direction uniform on the sphere,

with a on the simplex, eta > 0 and rows ||x_i|| <= 1.  Prop. II.2: the output
is (eps_i + Delta)-DP for seller i with eps_i = a_i eta.  Its proof (Eqs.
23-25) bounds the Jacobian ratio of seller m by (1 + a_m / Lambda)^2, so the
guarantee we report is eps_i + 2 log(1 + a_i / Lambda) per seller (the paper
states the uniform Delta = 2 log(1 + k/(m Lambda)) >= this for a_i <= k/m).
A seller with a_i = 0 does not enter the objective and is 0-DP.
Rows are divided by ``data_norm`` before fitting (the proof needs ||x|| <= 1);
``coef_`` is expressed in the caller's units.  No intercept, as in the paper:
append a constant feature (inside the norm bound) if one is wanted.

The log is natural, as Prop. II.2 needs: the noise b' = 2b/eta gives eps_i = a_i eta
because |d/dz ln(1 + e^-z)| <= 1 (with log base 2 the bound is 1/ln 2 and the same
noise would give a_i eta / ln 2).  Thm II.4's proof needs base 2 instead:
1[z <= 0] <= log2(1 + e^-z) (ln fails for -0.541 < z <= 0) and its 1/ln 2 is the
Lipschitz constant of log2(1 + e^-z).  Redone with ln, Thm II.4 reads
E[1(error)] <= (1/ln 2) (L_hat + mu_e ||a|| + sigma/eta), L_hat Eq. 2 with ln,
mu_e = (3 ln(1/delta)/sqrt 2) ln(1 + e^beta) + beta: the paper's right-hand side
with beta/ln 2 replaced by beta inside and the whole bound multiplied by
1/ln 2 ~ 1.443.  Minimising Eq. 10 or 17 (ln surrogate + gamma * payments) is
therefore minimising that bound on the misclassification error plus
(gamma/ln 2) * payments.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize
from scipy.special import expit, log1p
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from ..errors import MarketSimError

__all__ = [
    "HeteroDPLogisticRegression",
    "weighted_logistic_fit",
    "draw_noise",
    "objective_perturbation",
]


def weighted_logistic_fit(
    SZ: np.ndarray, a: np.ndarray, reg_lambda: float, linear=None, w0=None
) -> np.ndarray:
    """argmin_w sum_i a_i log(1 + exp(-w.SZ_i)) + linear.w + (reg_lambda/2)||w||^2
    (Eq. 2, 003; rows SZ_i = y_i x_i).  Strongly convex, so L-BFGS finds the optimum."""
    d = SZ.shape[1]
    lin = np.zeros(d) if linear is None else linear

    def objective(w):
        margin = SZ @ w
        loss = np.dot(a, np.logaddexp(0.0, -margin))
        grad = -(SZ.T @ (a * expit(-margin)))
        return loss + lin @ w + 0.5 * reg_lambda * w @ w, grad + lin + reg_lambda * w

    start = np.zeros(d) if w0 is None else w0
    return optimize.minimize(
        objective, start, jac=True, method="L-BFGS-B", options={"maxiter": 10_000, "gtol": 1e-10}
    ).x


def draw_noise(d: int, rng: np.random.Generator) -> np.ndarray:
    """b of Algorithm 1 (003): ||b|| ~ Gamma(d, 1), direction uniform on the sphere."""
    direction = rng.standard_normal(d)
    return rng.gamma(d, 1.0) * direction / np.linalg.norm(direction)


def objective_perturbation(
    SZ: np.ndarray, a: np.ndarray, eta: float, reg_lambda: float, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """Algorithm 1 (003) on signed rows SZ_i = y_i x_i (||x_i|| <= 1), no input checks:
    (w, ||b||).  The estimator below validates its input and calls this."""
    b = draw_noise(SZ.shape[1], rng)
    return weighted_logistic_fit(SZ, a, reg_lambda, linear=2.0 * b / eta), float(np.linalg.norm(b))


def _rng(random_state) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(random_state)


class HeteroDPLogisticRegression(ClassifierMixin, BaseEstimator):
    """scikit-learn estimator for Algorithm 1 (003); see the module docstring.

    Give either ``epsilons`` (per row; then a = eps / sum(eps), eta = sum(eps),
    so a_i eta = eps_i exactly) or ``a`` and ``eta``; with neither, eps_i = 1.
    """

    def __init__(
        self,
        epsilons=None,
        *,
        a=None,
        eta=None,
        reg_lambda=1e-2,
        data_norm=1.0,
        clip=False,
        random_state=None,
    ):
        self.epsilons = epsilons
        self.a = a
        self.eta = eta
        self.reg_lambda = reg_lambda
        self.data_norm = data_norm
        self.clip = clip
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # binary only, as in the paper
        return tags

    def _weights(self, m: int):
        if self.epsilons is None and self.a is None and self.eta is None:
            return np.full(m, 1.0 / m), float(m)  # default: eps_i = 1 for every row
        if self.epsilons is not None:
            if self.a is not None or self.eta is not None:
                raise MarketSimError("give either epsilons or (a, eta), not both")
            eps = np.asarray(self.epsilons, dtype=float).ravel()
            ok = eps.size == m and not np.isnan(eps).any() and eps.min() >= 0 and eps.sum() > 0
            if not ok:
                raise MarketSimError(f"epsilons must be {m} values >= 0 with a positive sum")
            inf = np.isposinf(eps)
            if inf.any():  # the offline mechanism's zero-cost limit (docs/mathematics.md):
                # a uniform on the eps_i = +inf rows, eta = +inf, no noise (the limit of
                # eps / sum eps, as ``privacy.limit.weights``; learning stays apart from it)
                return inf / float(inf.sum()), np.inf
            return eps / eps.sum(), float(eps.sum())
        if self.a is None or self.eta is None:
            raise MarketSimError("give epsilons, or both a and eta")
        a = np.asarray(self.a, dtype=float).ravel()
        eta = float(self.eta)
        if a.size != m or not np.all(np.isfinite(a)) or a.min() < 0 or abs(a.sum() - 1) > 1e-9:
            raise MarketSimError(f"a must be {m} values >= 0 summing to 1")
        if not (np.isfinite(eta) and eta > 0):
            raise MarketSimError("eta must be a finite number > 0")
        return a, eta

    def fit(self, X, y):
        X, y = validate_data(self, X, y, dtype=float, y_numeric=False)
        kind = type_of_target(y, input_name="y", raise_unknown=True)
        if kind != "binary":
            raise MarketSimError(
                f"Only binary classification is supported (labels in {{0, 1}} "
                f"or {{-1, 1}}); the target is {kind}"
            )
        self.classes_ = np.unique(y)
        if self.classes_.size != 2:
            raise MarketSimError("Only binary classification is supported; y has one class")
        if not (np.isfinite(self.reg_lambda) and self.reg_lambda > 0):
            raise MarketSimError("reg_lambda must be > 0")
        if not (np.isfinite(self.data_norm) and self.data_norm > 0):
            raise MarketSimError("data_norm must be > 0")
        norms = np.linalg.norm(X, axis=1)
        too_long = norms > self.data_norm * (1 + 1e-12)
        if too_long.any():
            if not self.clip:
                i = int(np.argmax(too_long))
                raise MarketSimError(
                    f"row {i} has norm {norms[i]:.6g} > data_norm "
                    f"{self.data_norm:g}; rescale the data or pass clip=True"
                )
            X = X * np.minimum(1.0, self.data_norm / np.maximum(norms, 1e-300))[:, None]
        Z = X / self.data_norm
        s = np.where(y == self.classes_[1], 1.0, -1.0)
        a, eta = self._weights(X.shape[0])
        lam = float(self.reg_lambda)
        w, self.noise_norm_ = objective_perturbation(
            s[:, None] * Z, a, eta, lam, _rng(self.random_state)
        )
        self.coef_ = w / self.data_norm
        with np.errstate(invalid="ignore"):  # 0 x inf = 0: a row of weight 0 is unused
            self.eps_ = np.where(a > 0, a * eta, 0.0)
        self.privacy_guarantees_ = self.eps_ + 2.0 * log1p(a / lam)  # Prop. II.2, Eq. 24-25
        self.a_, self.eta_ = a, eta
        return self

    def decision_function(self, X):
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, dtype=float, reset=False)
        return X @ self.coef_

    def predict_proba(self, X):
        p = expit(self.decision_function(X))
        return np.column_stack([1 - p, p])

    def predict(self, X):
        positive = self.decision_function(X) > 0
        return self.classes_[positive.astype(int)]
