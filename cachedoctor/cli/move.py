"""`cachedoctor move`: being written."""
