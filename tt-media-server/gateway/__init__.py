"""A JWT-verifying reverse proxy that runs in its own process in front of any HTTP server.

``python -m gateway --upstream http://127.0.0.1:8001 --port 8000`` (run from ``tt-media-server/``,
secret in ``JWT_SECRET``). See ``app.py`` for what it checks and how it streams.
"""
