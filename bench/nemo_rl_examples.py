"""How many of NeMo RL's example configs `rlplex estimate` reads, and why it refuses the rest.

Every YAML file under ``examples/configs`` of a NeMo RL checkout (a bare git directory and a
ref: its ``examples/`` tree is extracted to a temporary folder first) is estimated as a user
would, with the GPU and a prompt length given (NeMo RL's files name neither):
``rlplex estimate FILE --set cluster.gpu=h100 --set workload.prompt_tokens.mean=100
--set workload.prompt_tokens.max=512 --json``. A file counts as read when the command exits
0; the refusals are grouped by their error line, the file's path cut out.

    python bench/nemo_rl_examples.py /work/.mirror/NVIDIA-NeMo+RL/repo [--ref HEAD]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SETS = (
    "cluster.gpu=h100",
    "workload.prompt_tokens.mean=100",
    "workload.prompt_tokens.max=512",
)


def extract(repo: Path, ref: str, into: Path) -> Path:
    """``examples/`` of ``ref`` in the bare git directory ``repo``, written under ``into``."""
    archive = into / "examples.tar"
    with archive.open("wb") as out:
        subprocess.run(
            ["git", f"--git-dir={repo}", "archive", ref, "examples"], stdout=out, check=True
        )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "examples" / "configs"


def estimate(path: Path) -> tuple[bool, str]:
    """Whether ``rlplex estimate`` reads ``path``, and its last error line if not."""
    command = [sys.executable, "-m", "rlplex.cli", "estimate", str(path), "--json"]
    for value in SETS:
        command += ["--set", value]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return True, ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if not lines:  # --json reports a config that does not fit on stdout
        return False, "does not fit the GPU (the JSON report's error)"
    return False, lines[-1].replace(str(path), "FILE")[:120]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a NeMo RL bare git directory")
    parser.add_argument("--ref", default="HEAD", help="the commit or tag to read (HEAD)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        configs = extract(args.repo, args.ref, Path(tmp))
        files = sorted(configs.rglob("*.yaml"))
        reasons: collections.Counter[str] = collections.Counter()
        example: dict[str, str] = {}
        read = 0
        for i, path in enumerate(files, 1):
            ok, why = estimate(path)
            read += ok
            if not ok:
                reasons[why] += 1
                example.setdefault(why, str(path.relative_to(configs)))
            print(f"\r{i}/{len(files)} files, {read} read", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    print(f"{read} of {len(files)} example configs estimate ({args.ref})")
    for why, count in reasons.most_common():
        print(f"{count:4d}  {why}  e.g. {example[why]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
