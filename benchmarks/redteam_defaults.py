"""The red-team corpus (tests/redteam/) audited, with the verdict table.

    python benchmarks/redteam_defaults.py [--test-settings] [--only NAME ...] [--known-wrong]

By default every case is audited at the audit's default settings (10 sellers x 20
markets, a population at its own size) on seeds 0 and 1; ``--test-settings`` uses the
smaller settings of tests/test_redteam.py instead.  Prints one row per case and seed:
the class, the truth, the verdicts the truth allows, the audit's verdict and IR verdict,
whether they are right, and the seconds taken.  ``--known-wrong`` prints the wrong ones
as rows of tests/redteam/KNOWN_WRONG.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from redteam import CASES, SEEDS, run_audit  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--test-settings", action="store_true")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--known-wrong", action="store_true")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if not args.only or c.name in args.only]
    wrong, total = [], 0.0
    print("| mechanism | class | truth | allowed | seed | audit | right | s |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        ic, ir = case.allowed()
        truth = f"{'IC' if case.ic else 'not IC'}, {'IR' if case.ir else 'not IR'}"
        for seed in SEEDS:
            t0 = time.perf_counter()
            s = run_audit(case, seed, defaults=not args.test_settings).summary
            dt = time.perf_counter() - t0
            total += dt
            given = f"{s['verdict']}/{s['ir_verdict']}"
            ok = s["verdict"] in ic and s["ir_verdict"] in ir
            allowed = f"{' or '.join(ic)} / {' or '.join(ir)}"
            if not ok:
                wrong.append((case.name, seed, given, allowed))
            print(f"| {case.name} | {case.cls} | {truth} | {allowed} | {seed} | {given} | "
                  f"{'yes' if ok else 'NO'} | {dt:.1f} |", flush=True)  # fmt: skip
    n = len(cases) * len(SEEDS)
    print(f"\n{n - len(wrong)} of {n} audits right; {total:.0f} s in all")
    if args.known_wrong:
        print("\n| mechanism | seed | given | right |\n|---|---|---|---|")
        for name, seed, given, right in wrong:
            print(f"| {name} | {seed} | {given} | {right} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
