"""pcmkimg: per-node floating image names for Pacemaker container bundles."""

__version__ = "0.1.0"
