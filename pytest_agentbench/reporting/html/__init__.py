"""The HTML pages of the reports: the run page (run_page.py), the paired and compare pages
(pages.py), the runs index (index.py); their Jinja templates, style sheet and script are files
of their own (templates/, report.css, report.js; assets.py reads them)."""
