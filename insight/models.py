"""Insight's own tables."""
