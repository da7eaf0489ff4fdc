"""The games: how sellers play a mechanism when they bid strategically (docs/equilibrium.md,
docs/egta.md, docs/env.md).

Modules, from the top (each imports only those below it; ``lint-imports`` checks it):

* ``equilibrium``: Bayes-Nash equilibria of any mechanism and their verification
  (``bne``, ``symmetric_bne``, ``bne_epsilon``; ``market-sim bne``);
* ``psro`` and ``egta``: PSRO over bid functions and the collusion index; empirical
  games of strategies, their reduction and equilibria (``market-sim psro``, ``egta``);
* ``egta_markets`` and ``egta_result``: egta's simulations, and what it returns (tables,
  files, the figure);
* ``regret_bounds`` and ``replicator``: regret intervals and tests of a meta-game's
  mixtures; its equilibria by replicator dynamics;
* ``symmetric_game``: the meta-game in counts form and its deviation-preserving reduction;
* ``equilibrium_distributional``: the second BNE solver (mixed strategies on a grid);
* ``equilibrium_envelope``: a bid table's payments made to agree with its allocation;
* ``equilibrium_game``: the solver's sampled game (classes, samples, best responses);
* ``env``: the market as PettingZoo and Gymnasium environments.

The former paths ``market_sim.equilibrium``, ``market_sim.egta``, ``market_sim.psro`` and
``market_sim.env`` are aliases of these modules (the same module objects), so code written
against them keeps working.
"""
