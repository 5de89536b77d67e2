"""The web UI's pages: Starlette routes, Jinja2 templates, inline SVG charts, static assets."""
