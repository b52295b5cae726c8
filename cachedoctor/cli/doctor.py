"""`cachedoctor doctor`: being written."""
