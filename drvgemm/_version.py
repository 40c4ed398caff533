"""The package version, in a module of its own so that the compiler's cache
key can read it without importing the package's public surface."""
__version__ = "0.1.0"
