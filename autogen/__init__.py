"""Bindings generated from real C headers (never edited by hand) and the generator that writes them.

`python -m autogen [name ...]` regenerates the modules; see autogen/__main__.py for the registry.
"""
