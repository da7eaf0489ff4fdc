import numpy as np
import pytest
from hypothesis import settings

settings.register_profile("market_sim", deadline=None, max_examples=40, derandomize=True)
settings.load_profile("market_sim")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
