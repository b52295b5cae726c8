"""`cachedoctor tune`: being written."""
