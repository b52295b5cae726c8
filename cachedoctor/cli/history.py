"""`cachedoctor history`: being written."""
