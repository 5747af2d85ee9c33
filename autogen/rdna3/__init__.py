"""RDNA3 (gfx11) ISA tables generated from LLVM 22's disassembler: `python -m autogen.rdna3`."""
