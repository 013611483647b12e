"""Answer → claims: sentences, markdown prose, stream pieces, JSON statements."""
