"""`cachedoctor env`: being written."""
