"""Workflows that combine the layers and return result objects (plan, estimate, sweep, ...).

The CLI calls these and renders their results; they print nothing themselves.
"""
