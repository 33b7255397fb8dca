"""Ground floor: host-side file access confined to a workspace directory.

`files` (the `Files` port, `PathEscape`, `fold_parts`), `host_files` (`HostFiles`, its host-side
implementation), `regular_files` (descriptor-level I/O that never opens a FIFO or a symlink),
`walk` (the bounded directory walk and `Listing`), `deadline` (the tool call's deadline for
host-side work), `globs` (glob matching on workspace paths), `trees` (copy, remove and chown a
whole tree), `project` (the project root and its agentbench ini keys, found from a directory as
pytest finds its rootdir, for the CLI).

Imports only the standard library.
"""
