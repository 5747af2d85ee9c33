"""Generated bindings and their generators (`python -m autogen`); never edited by hand."""
