"""``pcmkimg guard add|remove|show``: one command each (:mod:`.add`, :mod:`.remove`,
:mod:`.show`), each its own ``run(ctx, request) -> report``."""
