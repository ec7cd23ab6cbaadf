"""Code extraction from replies: every failure kind has its machine-readable reason."""

from __future__ import annotations

from kernelband.generate.extract import extract_code

GOOD = '''@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    pass


def entry(x):
    return x
'''


def test_the_block_defining_the_entry_is_taken() -> None:
    reply = f"Plan.\n```python\n{GOOD}```\nUsage:\n```python\nentry(torch.ones(3))\n```\n"
    found = extract_code(reply, "entry")
    assert found.ok and found.code == GOOD


def test_whole_file_replies_are_cut_to_the_editable_region() -> None:
    whole = f"import torch\n# kernelband: editable begin\n{GOOD}# kernelband: editable end\nCASES = []\n"
    found = extract_code(f"```python\n{whole}```", "entry")
    assert found.ok and found.code == GOOD


def test_failure_reasons() -> None:
    assert extract_code("no code here", "entry").reason == "no_code_block"
    assert extract_code("```python\ndef entry(:\n```", "entry").reason == "syntax_error:line 1"
    assert extract_code(f"```python\n{GOOD}```", "main").reason == "missing_entry:main"
    assert extract_code("```python\ndef entry():\n    pass\n```", "entry").reason == "missing_kernel"
    assert extract_code(f"```python\n{GOOD}", "entry").reason == "truncated_reply"
    assert extract_code(f"```python\n{GOOD}```", "entry", "length").reason == "truncated_reply"
