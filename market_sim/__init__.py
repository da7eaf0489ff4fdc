"""market_sim: an agent-based testbed for privacy data markets.

The core is pure: ``market_sim.distributions`` (cost distributions, virtual
costs, ironing) and ``market_sim.mechanisms`` (the exact offline mechanism and
its Myerson payments).
"""

__version__ = "0.1.0"
