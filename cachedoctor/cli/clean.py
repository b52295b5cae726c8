"""`cachedoctor clean`: being written."""
