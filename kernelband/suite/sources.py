"""Reading a suite's problem files from a directory or an uploaded .zip / .tar.gz archive."""

from __future__ import annotations

import io
import tarfile
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

MAX_FILES = 500  # a suite is a benchmark, not a file dump; more is almost surely a mistake
MAX_FILE_BYTES = 1_000_000


class SuiteSourceError(ValueError):
    """The directory or archive could not be read as a set of problem files."""


@dataclass(frozen=True)
class SuiteSource:
    """One problem file of a suite: its name (file stem) and its text."""

    name: str
    source: str
    perf_source: str = ""  # TritonBench-G: the NAME_perf.py harness found beside it


def _accept(path: PurePosixPath) -> bool:
    """Python files only, skipping hidden files, caches and package markers."""
    hidden = any(part.startswith((".", "__")) for part in path.parts)
    return path.suffix == ".py" and not hidden and path.name != "__init__.py"


def _unique(sources: list[SuiteSource]) -> list[SuiteSource]:
    names = [s.name for s in sources]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise SuiteSourceError(f"several files are named {', '.join(clashes)}; give every "
                               "problem file a distinct name")
    if not sources:
        raise SuiteSourceError("no problem files (*.py) found; put one problem per .py file")
    if len(sources) > MAX_FILES:
        raise SuiteSourceError(f"{len(sources)} problem files; a suite takes at most "
                               f"{MAX_FILES}, split it into several suites")
    return sorted(sources, key=lambda s: s.name)


def _decode(name: str, data: bytes) -> str:
    if len(data) > MAX_FILE_BYTES:
        raise SuiteSourceError(f"{name} is {len(data)} bytes; a problem file may have at most "
                               f"{MAX_FILE_BYTES}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SuiteSourceError(f"{name} is not UTF-8 text ({exc}); save it as UTF-8") from exc


def read_directory(directory: Path) -> list[SuiteSource]:
    """Every problem file directly in `directory` (not recursive), sorted by name."""
    if not directory.is_dir():
        raise SuiteSourceError(f"{directory} is not a directory; pass a folder of problem files")
    files = [p for p in directory.iterdir() if p.is_file() and _accept(PurePosixPath(p.name))]
    sources = [SuiteSource(p.stem, _decode(p.name, p.read_bytes())) for p in files]
    return _unique(pair_perf_harnesses(sources))


PERF_SUFFIX = "_perf"


def pair_perf_harnesses(sources: list[SuiteSource]) -> list[SuiteSource]:
    """NAME_perf.py files become the performance harness of NAME.py, not problems."""
    harnesses = {s.name.removesuffix(PERF_SUFFIX): s.source for s in sources
                 if s.name.endswith(PERF_SUFFIX)}
    problems = [s for s in sources if not (s.name.endswith(PERF_SUFFIX)
                                           and s.name.removesuffix(PERF_SUFFIX) in
                                           {p.name for p in sources})]
    return [replace(s, perf_source=harnesses.get(s.name, s.perf_source)) for s in problems]


def attach_perf_dir(sources: list[SuiteSource], perf_dir: Path) -> list[SuiteSource]:
    """Each problem NAME gets perf_dir/NAME_perf.py as its harness, where that file exists."""
    if not perf_dir.is_dir():
        raise SuiteSourceError(f"{perf_dir} is not a directory; pass the folder of NAME_perf.py "
                               "harness files")
    out = []
    for s in sources:
        path = perf_dir / f"{s.name}{PERF_SUFFIX}.py"
        text = _decode(path.name, path.read_bytes()) if path.is_file() else s.perf_source
        out.append(replace(s, perf_source=text))
    return out


def read_archive(data: bytes, filename: str) -> list[SuiteSource]:
    """Every problem file in a .zip or .tar.gz archive (any folder depth), sorted by name."""
    lower = filename.lower()
    if lower.endswith(".zip"):
        return _unique(pair_perf_harnesses(list(_zip_members(data))))
    if lower.endswith((".tar.gz", ".tgz", ".tar")):
        return _unique(pair_perf_harnesses(list(_tar_members(data))))
    raise SuiteSourceError(f"{filename!r} is not a .zip, .tar.gz or .tgz archive; upload one "
                           "of those")


def _zip_members(data: bytes) -> list[SuiteSource]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise SuiteSourceError(f"the upload is not a valid zip archive ({exc})") from exc
    out = []
    for info in archive.infolist():
        path = PurePosixPath(info.filename)
        if not info.is_dir() and _accept(path):
            if info.file_size > MAX_FILE_BYTES:
                raise SuiteSourceError(f"{info.filename} is {info.file_size} bytes; a problem "
                                       f"file may have at most {MAX_FILE_BYTES}")
            out.append(SuiteSource(path.stem, _decode(info.filename, archive.read(info))))
    return out


def _tar_members(data: bytes) -> list[SuiteSource]:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            return [_tar_source(archive, m) for m in archive.getmembers()
                    if m.isfile() and _accept(PurePosixPath(m.name))]  # links are never read
    except tarfile.TarError as exc:
        raise SuiteSourceError(f"the upload is not a valid tar archive ({exc})") from exc


def _tar_source(archive: tarfile.TarFile, member: tarfile.TarInfo) -> SuiteSource:
    if member.size > MAX_FILE_BYTES:
        raise SuiteSourceError(f"{member.name} is {member.size} bytes; a problem file may have "
                               f"at most {MAX_FILE_BYTES}")
    handle = archive.extractfile(member)
    data = handle.read() if handle is not None else b""
    return SuiteSource(PurePosixPath(member.name).stem, _decode(member.name, data))
