"""Ground floor: host-side file access confined to a workspace directory (`Files`, `PathEscape`,
`HostFiles`), glob matching on workspace paths, and whole-tree operations (copy, remove, chown).

Imports only the standard library.
"""
