"""Benchmarks of pcmkimg against a real sandbox cluster (``make bench``: ``python -m bench``).

Budgets are ratios against what Pacemaker already runs (the ``ocf:heartbeat:podman`` agent of the
same bundle), measured interleaved in one run so that machine load affects both sides alike.
They are checked here and printed side by side, never asserted in the test suite.
"""
