"""Errors raised for bad user input (the CLI prints them as one line)."""


class MarketSimError(ValueError):
    """A user mistake: bad input, bad parameter, unsupported distribution."""
