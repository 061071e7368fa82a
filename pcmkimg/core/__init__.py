"""The pure core: reference parsing, naming, the CIB model and its edits, planning, leases.

Nothing here does I/O: the modules import the standard library, lxml and each other only
(``tests/unit/test_layers.py`` checks it). Tests drive them with plain data and fixture XML.
"""
