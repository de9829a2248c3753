"""Secondary indexes, kept in every write's own transaction.

``maintenance`` keeps them and builds and drops them in the background; ``updates`` is
UpdateTable's index work."""
