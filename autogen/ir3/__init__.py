"""ir3 (Adreno a6xx shader ISA) decoding tables swept from mesa's ir3 disassembler (tinymesa): `python -m autogen.ir3`."""
