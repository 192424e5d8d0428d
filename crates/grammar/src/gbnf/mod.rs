//! GBNF: llama.cpp-compatible grammar text to IR and back.
