"""A session written out for people or other tools: a branch as Markdown, text or a linear
session file, and every attempt as one self-contained HTML page. Importing the package imports
none of its modules."""
