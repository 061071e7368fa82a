"""The decorator of pcmkimg's record classes: :func:`dataclasses.dataclass` (with ``field``
and ``replace``) as type checkers see it, the OCF toolkit's light stand-ins at run time
(:mod:`ocf._light`, which loads nothing else of the toolkit).

Every command is a fresh interpreter: the standard decorator compiles each class's methods
when its module is imported (about 0.6 ms a class; ``status`` imports some 60 of them) and
loads ``inspect``, ``ast`` and ``dis`` to do it; the stand-in makes a class in about 0.05 ms.
They behave the same for what pcmkimg uses: ``frozen``, field defaults and factories,
``repr`` and ``compare`` flags, ``__post_init__``, :func:`replace`; no record inherits another
(docs/benchmarks.md, budget 5).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dataclasses import dataclass, field, replace
else:
    from ocf._light import dataclass, field, replace

__all__ = ["dataclass", "field", "replace"]
