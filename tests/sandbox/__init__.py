"""The test sandbox: a local registry, podman node stores and a 3-node cluster."""
