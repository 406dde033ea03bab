"""Renderers: one per output format. Units are decided here and nowhere earlier."""
