"""The snapshot store: the walk of a folder and its stat index, content-addressed objects
(compressed or delta-stored) and the manifests that name them. What checkpoints and
restores build on; it knows nothing of sessions. Importing the package imports none of its
modules."""
