"""Mesa agents: sellers who decide what to report, a platform that runs a mechanism."""

from .markets import MECHANISMS, Market
from .model import MarketModel, PlatformAgent, SellerAgent
from .strategies import STRATEGIES

__all__ = ["MarketModel", "SellerAgent", "PlatformAgent", "Market", "MECHANISMS", "STRATEGIES"]
