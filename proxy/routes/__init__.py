"""HTTP routes: parse, call one function, respond."""
