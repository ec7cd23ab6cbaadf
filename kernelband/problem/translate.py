"""KernelBench files as published: a PyTorch `Model`, no Triton, no editable markers.

Such a file is accepted as a problem whose reference is `Model` and whose starting candidate is
a placeholder: the service appends an editable region holding `class ModelNew(Model)`, i.e. the
PyTorch model itself. That placeholder is the track's baseline (timed like the reference, as
KernelBench times its baseline) and never counts as a Triton kernel: a track is credited only
for a translated `ModelNew` that passed its checks. The first pull of each track, and every
pull whose parent is still the placeholder, is a `translate` step: the generator writes a
Triton `ModelNew` from the PyTorch source (kernelband/generate/prompts/translate.md.j2). Only an
LLM generator can translate, so a submission without a model is refused at once.

Pure text processing: nothing here imports or executes user code.
"""

from __future__ import annotations

from kernelband.problem.editable import BEGIN_MARKER, END_MARKER

TRANSLATE_STEP = "translate"
# The line above the appended region; it stays in written kernels (the region is then Triton).
PLACEHOLDER_NOTE = "# kernelband: ModelNew region added by the service (submitted as PyTorch only)"
PLACEHOLDER_REGION = (
    "class ModelNew(Model):\n"
    '    """Placeholder: the PyTorch Model itself, until a translate step writes Triton."""\n'
)
NEEDS_LLM = (
    "this is a KernelBench file as published (a PyTorch `Model`, no Triton `ModelNew`): its "
    "first step is translating Model into Triton, which only an LLM generator can do, and the "
    "rules generator was chosen. Name an LLM model (CLI: --model, e.g. openai/gpt-4o-mini, with "
    "KERNELBAND_LLM_API_KEY and, for a local server, KERNELBAND_LLM_API_BASE; API: "
    "generator.model), or add a starting Triton `class ModelNew` between "
    f"'{BEGIN_MARKER}' and '{END_MARKER}'"
)


def is_published_kernelbench(source: str, format: str) -> bool:
    """A KernelBench file without editable markers and without any `ModelNew`."""
    return (format == "kernelbench" and BEGIN_MARKER not in source
            and END_MARKER not in source and "class ModelNew" not in source)


def with_placeholder(source: str) -> tuple[str, str]:
    """(source with the placeholder region appended, that region)."""
    block = f"\n\n{PLACEHOLDER_NOTE}\n{BEGIN_MARKER}\n{PLACEHOLDER_REGION}{END_MARKER}\n"
    return source.rstrip("\n") + block, PLACEHOLDER_REGION


def published_source(source: str) -> str:
    """The file as the user submitted it (the placeholder block cut off)."""
    return source.split(f"\n\n{PLACEHOLDER_NOTE}\n", 1)[0].rstrip("\n") + "\n"


def translation_refusal(source: str, format: str, model: str | None) -> str | None:
    """Why this submission is refused before loading (None: it may run)."""
    if is_published_kernelbench(source, format) and not (model or "").strip():
        return NEEDS_LLM
    return None


def suite_translation_refusal(named_sources: list[tuple[str, str]], format: str,
                              model: str | None) -> str | None:
    """Why a suite is refused before loading: files as published and no LLM model."""
    names = [name for name, source in named_sources
             if translation_refusal(source, format, model) is not None]
    if not names:
        return None
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"{len(names)} of {len(named_sources)} files ({shown}) need translation: {NEEDS_LLM}"
