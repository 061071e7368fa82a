"""The only doors to the world: the Pacemaker tools, the node image stores, and local state.

``pacemaker`` runs Pacemaker's tools; ``podman`` and ``localstore`` talk to the node image
stores (``tunnel`` reaches remote ones over ssh); ``journal`` and ``config`` are the local
files. Importing this package imports nothing else, so that the agent stays cheap.
"""
