"""A tenant's adapter: answer-level signals and features, and the combiner deciding with them."""
