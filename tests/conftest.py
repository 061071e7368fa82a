"""Shared pytest configuration.

Tests that need root, podman or pacemaker use the fixtures in
``tests/sandbox/fixtures.py``. They skip on a developer machine that lacks
them, but FAIL when ``CI=true``: a green CI run that skipped the sandbox
proves nothing.
"""

pytest_plugins = ["tests.sandbox.fixtures"]
