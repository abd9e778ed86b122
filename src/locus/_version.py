"""The package version: the one place it is written (pyproject.toml reads it, artifacts record
it as `locus_version`)."""

__version__ = "0.1.0"
