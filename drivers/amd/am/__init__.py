"""The AM driver: an AMD GPU booted and run from userspace through its PCI function, in Linux amdgpu's shape.

core.py (AMCore: discovery, the boot state machine), ip_block.py (the lifecycle), ip_table.py (discovered IP
version -> class); one module per IP block and version: soc21, gmc_v11_0, ih_v6_0, psp_v13_0, smu_v13_0, gfx_v11_0,
sdma_v6_0; helpers the blocks share: nbio_v4_3, hdp_v6_0, vmhub (+ gfxhub_v3_0, mmhub_v3_0); one module per page-table
entry layout (pte.py: pte_gfx11, pte_gfx12) and per firmware list (firmware.py: firmware_gc11), also picked by ip_table;
and what is no IP block: discovery.py, mm.py (VRAM, GPU VA and page tables)."""
