"""The bodies of the hot commands — what `scan`, `ls`, `doctor` and `profiles list` do once their line
is read — kept free of typer: `cli.quickrun` calls them straight from a line it has read with
the spec derived from typer's parser, and the typer command (`cli/scan.py`, ...) calls the same
function with what typer parsed. A body returns its exit code."""
