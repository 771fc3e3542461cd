"""poly stage."""
