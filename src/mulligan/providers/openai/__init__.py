"""The two OpenAI adapters: `chat` (Chat Completions, and compatible servers) and `responses`
(the Responses API at OpenAI's own endpoint). This file imports nothing: the `openai` SDK is
imported only when one of them is.
"""
