"""USB-attached PCIe: the ASM24xx USB3/USB4-to-PCIe bridge (asm24xx.py) in front of a PCI function model."""
