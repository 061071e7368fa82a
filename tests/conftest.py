"""Shared pytest configuration.

Tests that need root, podman or pacemaker use the fixtures in
``tests/sandbox/fixtures.py``. They skip on a developer machine that lacks
them, but FAIL when ``CI=true``: a green CI run that skipped the sandbox
proves nothing.
"""

pytest_plugins = ["tests.sandbox.fixtures"]


def pytest_configure(config: object) -> None:
    """Give the signals a person sends their default meaning again in this run.

    A shell starts a background job (``make test &``, ``.ci/run``'s Debian 13 half) with SIGINT
    and SIGQUIT ignored, and an ignored signal stays ignored across exec: every process the tests
    start would then ignore the Ctrl-C and SIGQUIT they send it (pcmkimg honours an inherited
    ignore, as with nohup), and those tests would fail for a reason that is not theirs."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
