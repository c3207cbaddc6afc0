"""``rlplex run`` without Ray (only the ``[run]`` extra installs it): one line, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from child_python import child_env

ROOT = Path(__file__).resolve().parents[2]

NO_RAY = """
import sys
sys.modules["ray"] = None  # as if Ray were not installed: `import ray` raises ImportError
from rlplex.cli import main
main(sys.argv[1:])
"""


def test_run_without_ray_says_how_to_install_it(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", NO_RAY, "run", str(ROOT / "examples" / "ppo.yaml"),
         "--record", str(record), "--time-scale", "0"],
        capture_output=True, text=True, env=child_env(), timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: rlplex run needs Ray: pip install 'rlplex[run]'"
    assert list(tmp_path.iterdir()) == []  # said before the record is claimed
