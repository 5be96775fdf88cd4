"""The review console's parts: signed sessions, document page rendering, templates and static files.

``session.py`` (cookies, CSRF), ``pages.py`` (page PNGs and text), ``templates/`` (Jinja2,
autoescaped), ``static/`` (vendored htmx 2.0.11 with its 0BSD licence, CSS, keyboard
shortcuts). The routes live in the ``services/api/routes/console/`` package; the guide is
``docs/review-console.md``.
"""
