"""Going back and making room: the branch line with the files put back, summaries of the
attempt left, and compaction of the older part of a branch. Importing the package imports none
of its modules."""
