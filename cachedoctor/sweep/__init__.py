"""`cachedoctor sweep`: project build outputs (node_modules, target, .venv, ...) found by their
markers, dated by their project's activity, deleted with the same deleter as `clean`."""
