"""The context_packer variant's pure parts: what a failing pytest run points at
(traceback_refs), which workspace files a module imports (imports), what to pack under a token
budget (packing) and the manifest that says why (manifest). No I/O here: the agent reads files
through its toolbox and hands the text in."""
