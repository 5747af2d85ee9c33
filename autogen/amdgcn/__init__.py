"""AMD GPU ISA tables (amdgcn: LLVM's name for the GCN / RDNA / CDNA instruction sets) generated from LLVM 22's
disassembler, one package per ISA generation: `python -m autogen.amdgcn [isa ...]` regenerates <isa>/tables.py.
ISAS lists the generations; a new one is a new package (encodings.py, probes.py, CPUS) and a row here."""
ISAS = ("gfx11", "gfx12")
