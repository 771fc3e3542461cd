"""codegen stage."""
