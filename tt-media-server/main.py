"""Entry point: `uvicorn main:app --lifespan on --port 8000` from this directory."""
from media_server.app import create_app

app = create_app()
