import pytest

from kernelband.config import Settings


def test_embedded_default_uses_sqlite(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert settings.effective_database_url.startswith("sqlite:///")


def test_production_refuses_sqlite_default():
    with pytest.raises(ValueError, match="KERNELBAND_DATABASE_URL"):
        Settings(environment="production")
