"""Shared fixtures: the SDK's tests use anyio's pytest plugin on asyncio, so do we."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
