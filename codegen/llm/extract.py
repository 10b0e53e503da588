"""Pure extraction of a candidate from an LLM reply.

The rule: a reply yields a candidate when exactly one Python code block in it contains
``class ModelNew``. Everything else is a parse error with a reason a person can read, and
nothing from that reply is compiled:

* no code block, or only blocks in another language ("cuda", "cpp", ...);
* two or more Python blocks that each define ``ModelNew`` (ambiguous: we never guess);
* a fence that is opened and never closed (the reply was cut off);
* text that is not valid UTF-8, NUL characters, or a reply over the size limit.

Other blocks (a shell command, a Python snippet without ``ModelNew``) are ignored. An
untagged block counts as Python. A structured-output reply (a JSON object with a ``code``
string) is read the same way, its ``code`` standing for the block's body.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

#: Fence tags taken as Python ("" = untagged).
PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", ""})

_FENCE = re.compile(r"^[ ]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
_MODEL_NEW = re.compile(r"^class[ \t]+ModelNew\b", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """One fenced block: its language tag, body, and whether its fence was closed."""

    lang: str
    body: str
    closed: bool = True


@dataclass(frozen=True, slots=True)
class Extraction:
    """The result of reading a reply: a candidate's source, or why there is none."""

    code: str | None
    error: str = ""
    notes: str = ""

    @property
    def ok(self) -> bool:
        return self.code is not None


def fenced_blocks(text: str) -> list[CodeBlock]:
    """The fenced code blocks of a Markdown text, in order (CommonMark fence rules:
    a closing fence uses the opening character, at least as many times, and no info)."""
    blocks: list[CodeBlock] = []
    # Only \n (and \r\n) end lines: str.splitlines() would also split inside code at
    # form feeds, NEL or U+2028, and so change the candidate's source.
    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group("fence")
        lang = (m.group("info").strip().split() or [""])[0].lower()
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            c = _FENCE.match(lines[i])
            if c and c.group("fence")[0] == fence[0] and len(c.group("fence")) >= len(fence) \
                    and not c.group("info").strip():
                closed = True
                i += 1
                break
            body.append(lines[i])
            i += 1
        blocks.append(CodeBlock(lang, "\n".join(body) + "\n", closed))
    return blocks


def defines_model_new(code: str) -> bool:
    """Whether ``code`` has a top-level ``class ModelNew`` line (syntax is not checked
    here: a candidate that does not parse goes to the static check and the repair turn)."""
    return _MODEL_NEW.search(code) is not None


def _check_text(text: str, max_chars: int) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (f"reply is not valid UTF-8 (undecodable byte at character {e.start}); "
                "nothing was compiled")
    if len(text) > max_chars:
        return (f"reply is {len(text):,} characters, over the limit of {max_chars:,}; "
                "nothing was compiled")
    if "\x00" in text:
        return "reply contains NUL characters; nothing was compiled"
    return ""


def _from_json(text: str) -> Extraction | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    code = data.get("code")
    if not isinstance(code, str) or not code.strip():
        return Extraction(None, "structured reply has no 'code' string")
    notes = data.get("explanation") or data.get("notes") or ""
    inner = fenced_blocks(code)
    if len(inner) == 1 and inner[0].closed:  # a model that fenced the code inside JSON
        code = inner[0].body
    if not defines_model_new(code):
        return Extraction(None, "structured reply's code does not define class ModelNew")
    return Extraction(code.rstrip() + "\n", notes=str(notes))


def extract_candidate(text: str, *, max_chars: int = 400_000) -> Extraction:
    """Find the one candidate in an LLM reply.

    Args:
        text: the reply (as decoded; undecodable bytes arrive as lone surrogates).
        max_chars: replies longer than this are rejected unread.

    Returns:
        An :class:`Extraction` with the candidate source, or with ``error`` set.
    """
    problem = _check_text(text, max_chars)
    if problem:
        return Extraction(None, problem)
    structured = _from_json(text)
    if structured is not None:
        return structured
    blocks = fenced_blocks(text)
    if not blocks:
        return Extraction(None, "reply has no fenced code block (expected one ```python "
                                "block defining class ModelNew)")
    unclosed = [b for b in blocks if not b.closed]
    if unclosed:
        return Extraction(None, "reply has a code fence that is never closed (the reply was "
                                "probably cut off); nothing was compiled")
    python = [b for b in blocks if b.lang in PYTHON_TAGS]
    if not python:
        langs = ", ".join(sorted({b.lang for b in blocks}))
        return Extraction(None, f"reply's code blocks are tagged {langs}, not python; the "
                                "candidate must be one ```python block")
    with_model = [b for b in python if defines_model_new(b.body)]
    if len(with_model) > 1:
        return Extraction(None, f"reply is ambiguous: {len(with_model)} python blocks define "
                                "class ModelNew; expected exactly one")
    if not with_model:
        return Extraction(None, "no python block in the reply defines class ModelNew")
    notes = text.split("```", 1)[0].strip()
    return Extraction(with_model[0].body.rstrip() + "\n", notes=notes[:2000])
