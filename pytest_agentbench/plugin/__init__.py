"""The pytest glue, kept thin: the `pytest11` entry point (entry.py), the plugin object whose
methods are the hooks, options, collection of task items, fixtures and xdist plumbing.

The only package that imports pytest. May import everything below it (run and down).
"""
