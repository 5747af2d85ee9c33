"""What the drivers and the hardware models share without either importing the other: the declarations a model plugs
in with (plugin.py) and the range allocator both use (alloc.py). Imports nothing of the repository."""
