"""Reading problem files from a directory, a zip and a tar.gz."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from kernelband.suite.sources import SuiteSourceError, read_archive, read_directory


def test_directory_reads_python_files_sorted_and_skips_others(tmp_path: Path) -> None:
    (tmp_path / "b.py").write_text("B")
    (tmp_path / "a.py").write_text("A")
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / ".hidden.py").write_text("x")
    sources = read_directory(tmp_path)
    assert [(s.name, s.source) for s in sources] == [("a", "A"), ("b", "B")]


def test_empty_or_missing_directory_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(SuiteSourceError, match="no problem files"):
        read_directory(tmp_path)
    with pytest.raises(SuiteSourceError, match="not a directory"):
        read_directory(tmp_path / "missing")


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _tar(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("evil.py")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    return buffer.getvalue()


def test_zip_and_tar_give_the_same_sources() -> None:
    files = {"suite/relu.py": "R", "suite/gelu.py": "G", "suite/README.md": "x",
             "__MACOSX/._relu.py": "junk"}
    from_zip = read_archive(_zip(files), "s.zip")
    from_tar = read_archive(_tar(files), "s.tar.gz")
    assert from_zip == from_tar
    assert [s.name for s in from_zip] == ["gelu", "relu"]  # the symlink was not followed


def test_bad_archives_are_refused_with_a_reason() -> None:
    with pytest.raises(SuiteSourceError, match="not a .zip"):
        read_archive(b"x", "s.rar")
    with pytest.raises(SuiteSourceError, match="valid zip"):
        read_archive(b"not a zip", "s.zip")
    with pytest.raises(SuiteSourceError, match="distinct name"):
        read_archive(_zip({"a/x.py": "1", "b/x.py": "2"}), "s.zip")
