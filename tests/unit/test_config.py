import pytest

from kernelband.config import Settings


def test_embedded_default_uses_sqlite(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert settings.effective_database_url.startswith("sqlite:///")


def test_production_refuses_sqlite_default():
    settings = Settings(environment="production")  # a worker: no database, and none needed
    with pytest.raises(ValueError, match="KERNELBAND_DATABASE_URL"):
        settings.effective_database_url  # noqa: B018 - the api, scheduler and migrations ask


def test_production_worker_settings_and_app_load_without_a_database(monkeypatch):
    """docker-compose gives workers a broker and no database URL, in production."""
    import importlib
    import sys

    from kernelband.config import get_settings

    monkeypatch.setenv("KERNELBAND_ENVIRONMENT", "production")
    monkeypatch.delenv("KERNELBAND_DATABASE_URL", raising=False)
    get_settings.cache_clear()
    try:
        sys.modules.pop("services.worker.app", None)
        module = importlib.import_module("services.worker.app")
        assert module.app.main
    finally:
        get_settings.cache_clear()
        sys.modules.pop("services.worker.app", None)
