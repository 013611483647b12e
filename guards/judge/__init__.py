"""The second opinion: which claims go to the LLM judge, its prompt and checks, its merged word."""
