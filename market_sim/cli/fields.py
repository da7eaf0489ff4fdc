"""``market-sim fields``: mechanisms reading several fields, audited jointly on the same markets."""

from __future__ import annotations

from .arguments import count, number, positive


def add_parser(subparsers):
    a = subparsers.add_parser(
        "fields",
        help="audit mechanisms reading cost, cap and size jointly over every private field, "
        "on the same markets",
        description="Draw K markets of a population with several fields "
        "(COUNT*LAW;cap=LAW;size=integers:LO:HI[;private=cost,cap]; docs/multifield.md), "
        "audit every --mechanism on them by misreporting every private field jointly "
        "(grids per field, the joint grid, a local search), and print a leaderboard with "
        "each verdict, ranked: no gain found first, then IR, then the mean of Eq. 11 with "
        "the payments made (truthful reports; lower is better). A seller whose cap is "
        "exceeded has an unbounded loss (not IR). "
        "With --out FILE.csv also writes the table. Exit status 0, 2 on bad input.",
    )
    a.add_argument(
        "--mechanism",
        action="append",
        required=True,
        metavar="SPEC",
        help="a multi-field mechanism (posted-price-caps, cap-threshold, fair-query-caps, "
        "all-in, vcg-procurement, csra, mfg-pricing; docs/multifield.md) as name or "
        "name:key=value, or a "
        "one-field mechanism (it reads the cost only); repeat to compare",
    )
    a.add_argument(
        "--population",
        required=True,
        metavar="SPEC",
        help="e.g. 10*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500",
    )
    a.add_argument("--markets", type=count("markets"), default=50, help="markets (default 50)")
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    a.add_argument(
        "--field-grid",
        type=number("field-grid", int, lambda v: v >= 2, ">= 2"),
        default=25,
        help="grid points per field, the others true (default 25)",
    )
    a.add_argument(
        "--joint-grid", type=count("joint-grid"), default=9, help="points per field, jointly (9)"
    )
    a.add_argument(
        "--local-steps",
        type=number("local-steps", int, lambda v: v >= 0, ">= 0"),
        default=12,
        help="rounds of local search (default 12)",
    )
    for name in ("mu", "sigma", "gamma"):
        a.add_argument(
            f"--{name}", type=positive(name), default=1.0, help=f"Eq. 11's {name} (default 1)"
        )
    a.add_argument(
        "--rounds",
        type=number("rounds", int, lambda v: v >= 0, ">= 0"),
        default=0,
        help="also play one market this many rounds with best-responding sellers who "
        "misreport any private field (default 0: no play)",
    )
    a.add_argument(
        "--strategic-share",
        type=number("strategic-share", float, lambda v: 0 <= v <= 1, "in [0, 1]"),
        default=1.0,
        help="share of sellers who best-respond in --rounds (default 1)",
    )
    a.add_argument("--out", metavar="FILE.csv", default=None, help="also write the table here")
    a.set_defaults(func=run)
    return a


def run(args) -> int:
    import numpy as np

    from ..files import atomic_write, check_writable_file
    from ..joint_audit import compare_jointly

    if args.out:
        check_writable_file(args.out)
    result = compare_jointly(
        args.mechanism,
        args.population,
        args.markets,
        np.random.default_rng(args.seed),
        field_grid=args.field_grid,
        joint_grid=args.joint_grid,
        local_steps=args.local_steps,
        mu=args.mu,
        sigma=args.sigma,
        gamma=args.gamma,
    )
    lines = _csv(result.rows())
    print("\n".join(lines))
    for audit in result.audits:
        print(f"{audit.mechanism}: {audit.ic_verdict}; {audit.ir_verdict}")
    if args.rounds:
        _play(args)
    if args.out:
        atomic_write(args.out, lambda fh: fh.write(("\n".join(lines) + "\n").encode()))
    return 0


def _play(args) -> None:
    """Per round and mechanism: the play of one market (joint_audit.play_fields)."""
    import numpy as np

    from ..joint_audit import play_fields

    rows = []
    for spec in args.mechanism:
        play = play_fields(
            spec,
            args.population,
            args.rounds,
            np.random.default_rng(args.seed),
            strategic_share=args.strategic_share,
            field_grid=args.field_grid,
            joint_grid=args.joint_grid,
            local_steps=args.local_steps,
        )
        rows += [{**r, "mechanism": spec} for r in play.rows()]
    print("\n" + "\n".join(_csv(rows)))


def _csv(rows: list[dict]) -> list[str]:
    """A header line and a line per row (numbers to 6 significant digits)."""

    def cell(v) -> str:
        return f"{v:.6g}" if isinstance(v, float) else str(v)

    header = list(rows[0])
    return [",".join(header)] + [",".join(cell(r[h]) for h in header) for r in rows]
