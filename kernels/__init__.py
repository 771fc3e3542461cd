"""Operator definitions (.tc files) shipped with polyopt."""
