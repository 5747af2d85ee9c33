"""What the drivers and the hardware models share without either importing the other: the declarations a model plugs
in with (plugin.py), the range allocator both use (alloc.py) and the directories both write, checked (dirs.py). Imports
nothing of the repository."""
