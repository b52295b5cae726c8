"""`cachedoctor quota`: being written."""
