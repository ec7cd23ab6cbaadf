"""Team dashboard: HTML pages served by the API; the data comes from the team-scoped JSON API."""

from services.api.dashboard.pages import router

__all__ = ["router"]
