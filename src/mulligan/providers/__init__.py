"""Model providers: the protocol (`base`), adapters, and name resolution (`registry`)."""
