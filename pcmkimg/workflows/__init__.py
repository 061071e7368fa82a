"""One module per command: each runs the pure core's decisions through the adapters.

Only ``pcmkimg.cli`` and ``pcmkimg.agent`` import a workflow.
"""
