"""Session-scoped pytest fixtures for the sandbox."""
