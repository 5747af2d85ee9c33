"""AMD GPUs. So far: the kernel compiler (OpenCL C -> HSA code object); the device driver comes separately."""
