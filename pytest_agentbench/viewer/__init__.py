"""`agentbench view [OUT_DIR]`: a local web viewer over an output root, served on loopback.

- server.py: the ThreadingHTTPServer, its routes and headers (CSP, nosniff, no caching);
- confine.py: which URL paths and run names mean a file or a run inside the root (nothing else);
- live.py: what a run in progress is doing, tailed from its workers' event files;
- data.py: the JSON the pages poll (runs, one run's attempts, one attempt's trajectory);
- search.py: search across runs by task, reason, signature or command;
- pages.py: the viewer's own page shells and the reporting package's pages rendered on request;
- static/: the viewer's script and style sheet (every value goes into the page as text).

The statistics and the run, paired and compare pages are the reporting package's: called here,
never copied. The viewer writes nothing into the output root.
"""
