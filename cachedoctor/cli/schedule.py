"""`cachedoctor schedule`: being written."""
