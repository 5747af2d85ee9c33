"""AMD GPUs: the KFD (amdgpu.ko) and AM (userspace PCI) interfaces, PM4/SDMA queues, code objects."""
