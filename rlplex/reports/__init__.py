"""Workflows that combine the layers and return result objects (DESIGN.md: reports/)."""
