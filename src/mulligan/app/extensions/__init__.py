"""(the user's own setup: MCP servers, hooks, commands, skills; imports none of its modules)"""
