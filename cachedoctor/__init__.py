"""cachedoctor: find, measure, relocate, tune and clean the caches that fill your system drive."""

__version__ = "0.1.0"
