"""Secondary indexes: kept in every write's own transaction and built and dropped in the
background (``maintenance``), and UpdateTable's index work (``updates``)."""
