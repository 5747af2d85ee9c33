"""SQTT (SQ thread trace) decoding: the token streams AMD GPUs write per shader engine, as waves with each
instruction's issue time and stall, mapped back to the code object's disassembly. tokens.py is the format skeleton,
one module per generation holds its token layout (gfx11.py, gfx12.py), waves.py assembles and maps."""
from drivers.amd.sqtt.tokens import TraceError, Format, TokenType, pack
from drivers.amd.sqtt.waves import Wave, Issue, Code, decode, map_code, generation

__all__ = ["TraceError", "Format", "TokenType", "pack", "Wave", "Issue", "Code", "decode", "map_code", "generation"]
