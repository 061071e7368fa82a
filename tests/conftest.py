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
    and SIGQUIT ignored, ``nohup make test`` (the usual way to run the suite over ssh) starts it
    with SIGHUP ignored, and an ignored signal stays ignored across exec: every process the tests
    start would then ignore the Ctrl-C, SIGQUIT and SIGHUP they send it (pcmkimg honours an
    inherited ignore, as it must under nohup), and those tests would fail for a reason that is not
    theirs.

    SIGHUP gets a handler that does nothing rather than its default: exec resets a caught signal
    to its default, so the processes the tests start die of SIGHUP as they would outside nohup,
    while this run itself still outlives the ssh session that nohup protects it from."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _outlive_hangup)


def _outlive_hangup(_signum: int, _frame: object) -> None:
    """The test run's own SIGHUP under nohup: nothing (see ``pytest_configure``)."""
