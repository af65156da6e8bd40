"""The embedded model (`local/...` names): llama.cpp in this process.

`model` holds `LocalModel` and name resolution, `engine` loads xllamacpp and runs a request,
`chat` turns our transcript into the chat template's messages, `reply` is the
grammar-constrained reply (schema, scanner, parse). This file imports nothing, so importing
any of them stays as cheap as importing that module alone.
"""
