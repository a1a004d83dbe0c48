"""Command-line tools for users: offline validation and a status view of the cluster."""
