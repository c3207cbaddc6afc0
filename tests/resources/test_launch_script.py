"""verl launch scripts read as a shell runs them: the Hydra config and the overrides.

The verl tree is a stand-in built per test: ``verl/trainer/main_ppo.py`` with its
``@hydra.main`` line and ``verl/trainer/config/`` holding the hand-written
``tests/fixtures/importers/verl/conf`` files (``trainer_base.yaml`` as ``ppo_trainer.yaml``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config
from rlplex.errors import ConfigError, InvalidValueError
from rlplex.resources.importers.launch_script import (
    flag_arguments,
    hydra_value,
    is_launch_script,
    launch_config,
    read_launch,
)

CONF = Path(__file__).resolve().parents[1] / "fixtures" / "importers" / "verl" / "conf"
HYDRA = '@hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)\n'


def verl_tree(root: Path) -> Path:
    """A verl checkout's skeleton under ``root``; returns its examples folder."""
    trainer = root / "verl" / "trainer"
    shutil.copytree(CONF, trainer / "config")
    (trainer / "config" / "trainer_base.yaml").rename(trainer / "config" / "ppo_trainer.yaml")
    (root / "verl" / "__init__.py").write_text("")
    (trainer / "__init__.py").write_text("")
    (trainer / "main_ppo.py").write_text("import hydra\n\n" + HYDRA + "def main(config): ...\n")
    examples = root / "examples" / "grpo_trainer"
    examples.mkdir(parents=True)
    return examples


def read(text: str) -> tuple[str, ...]:
    return read_launch(text, file="run.sh").overrides


def test_overrides_of_a_typical_script() -> None:
    launch = read_launch(
        """set -x
# a comment
gsm8k=$HOME/data/gsm8k/train.parquet
export TP=2
train_files="['$gsm8k']"
MAX=${MAX_LEN:-2048}

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files="$train_files" \\
    data.max_response_length=$((MAX * 4)) \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=${TP} \\
    trainer.logger='["console","wandb"]' \\
    +actor_rollout_ref.rollout.engine_kwargs.x=1 ~trainer.foo \\
    trainer.total_epochs=15 $@ 2>&1 | tee log.txt
""",
        file="run.sh",
    )
    assert launch.module == "verl.trainer.main_ppo" and launch.line == 8
    assert launch.config_path is None and launch.config_name is None
    assert launch.overrides == (
        "algorithm.adv_estimator=grpo",
        "data.train_files=['$HOME/data/gsm8k/train.parquet']",  # $HOME is not read
        "data.max_response_length=8192",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        'trainer.logger=["console","wandb"]',
        "actor_rollout_ref.rollout.engine_kwargs.x=1",
        "trainer.total_epochs=15",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A=1\nB=${A:-9}\npython -m verl.x k=$B", ("k=1",)),
        ("B=${A:-9}\npython -m verl.x k=$B", ("k=9",)),
        ("A=\npython -m verl.x k=${A:-9} j=${A-8}", ("k=9", "j=")),
        ("A=1\npython -m verl.x k=${A:+set}", ("k=set",)),
        ("TP=${1:-4}\npython -m verl.x k=$TP", ("k=4",)),  # positional: the caller's
        ("python -m verl.x k=${1} j=$1", ("k=", "j=")),
        ("python -m verl.x k=$UNSET", ("k=$UNSET",)),
        ('python -m verl.x \'k=$A b\' "j=a\\"b"', ("k=$A b", 'j=a"b')),
        ("python -m verl.x k=$(( (2 + 3) * 4 / 3 ))", ("k=6",)),
        ("python -m verl.x k=$((X * 2))", ("k=$((X * 2))",)),
        ("N=2\npython -m verl.x k=$((1024*$N))", ("k=2048",)),
        ("cd /x && VLLM_USE_V1=1 python3 -m verl.x k=1; echo done", ("k=1",)),
        ("ray job submit --address=x -- python3 -m verl.x k=1", ("k=1",)),
        ("python -m verl.x k=1 # a=2", ("k=1",)),
        ("python -m verl.x k=a#b", ("k=a#b",)),
        ("python -m verl.x ++k=1 +j=2", ("k=1", "j=2")),
        ("python3 -m verl.x k=1\npython3 -m verl.x k=2", ("k=1",)),  # the first run
        # Found in review (2026-11-29): unquoted expansions split at blanks, arrays,
        # multi-line strings, pattern operators, a comment ending in a backslash.
        ('OPTS="k=1 j=2"\npython -m verl.x $OPTS', ("k=1", "j=2")),
        ('OPTS="k=1 j=2"\npython -m verl.x "$OPTS"', ("k=1 j=2",)),
        ('CFG="\n  a.b=1\n  a.c=2\n"\npython -m verl.x $CFG', ("a.b=1", "a.c=2")),
        ("D=(\n  k=1\n  'j=a b'\n)\npython -m verl.x \"${D[@]}\" ${D[0]}", ("k=1", "j=a b", "k=1")),
        (
            "A=actor.x\npython -m verl.x k=${A//actor/critic} j=${A#*.} i=${A%.*} h=${A:0:3}",
            ("k=critic.x", "j=x", "i=actor", "h=act"),
        ),
        ("python -m verl.x k=${A^^}", ("k=${A^^}",)),  # a form not followed stays as written
        ("# old run: \\\npython3 -m verl.x k=1", ("k=1",)),
        ("E=\npython -m verl.x $E k=1", ("k=1",)),
        ("A=1\r\npython -m verl.x k=$A\r\n", ("k=1",)),
        # assigned unsplit, split where used unquoted (b is no override)
        ('N="a b"\nW=x-${N}\npython -m verl.x k=$W j="$W"', ("k=x-a", "j=x-a b")),
        ("P=python\nif [ -f /x ]; then P=/opt/py; fi\n$P -m verl.x k=1", ("k=1",)),
        # An arithmetic expansion's closing parentheses do not end the array (found in
        # review, 2026-11-29: verl's run_qwen3_30b_veomni.sh lost every element after one).
        (
            'D=(\n  k=1\n  a=$((1024))\n  j=2\n)\npython -m verl.x "${D[@]}"',
            ("k=1", "a=1024", "j=2"),
        ),
    ],
)
def test_shell_expansion(text: str, expected: tuple[str, ...]) -> None:
    assert read(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a plain comparison picks its branch, as the shell does
        (
            'B=megatron\nif [ "$B" = megatron ]; then N=m; else N=f; fi\npython -m verl.x k=$N',
            ("k=m",),
        ),
        (
            "TP=${1:-4}\nif [ $TP -eq 4 ]; then\n  S=1024\nelif [ $TP -eq 2 ]; then\n  S=384\n"
            "fi\npython -m verl.x k=$S",
            ("k=1024",),
        ),
        ('if [ -z "$1" ]; then N=x; else N=$1; fi\npython -m verl.x k=$N', ("k=x",)),
        # a test not followed, or a loop: the variable is left as written, never guessed
        ("if grep -q a b; then N=1; else N=2; fi\npython -m verl.x k=$N", ("k=$N",)),
        ("for i in 1 2; do N=$i; done\npython -m verl.x k=$N", ("k=$N",)),
        ("N=0\nif [ -f x ]; then N=1; fi\npython -m verl.x k=$N", ("k=$N",)),
        ("if [ 1 -eq 2 ]; then python -m verl.x k=1; fi\npython -m verl.x k=2", ("k=2",)),
    ],
)
def test_branches(text: str, expected: tuple[str, ...]) -> None:
    assert read(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Found in review (2026-11-29): the idioms that find a script's own folder are worked
        # out on the paths (the script is /a/b/c/run.sh), as bash prints them.
        ('H="$( cd "$( dirname "${BASH_SOURCE[0]}" )" && pwd )"\npython -m verl.x k=$H',
         ("k=/a/b/c",)),
        ('S=$(cd -- "$(dirname -- "$0")" &>/dev/null && pwd)\npython -m verl.x k=$S',
         ("k=/a/b/c",)),
        ('S=$(cd "$(dirname "$0")" >/dev/null 2>&1; pwd)\npython -m verl.x k=$S', ("k=/a/b/c",)),
        ('R=$(dirname $(dirname "$(dirname $0)"))\npython -m verl.x k=$R/m', ("k=/a/m",)),
        ("R=$(realpath /a/b/c/../..)\npython -m verl.x k=$R j=$(basename $0 .sh)",
         ("k=/a", "j=run")),
        ('python -m verl.x k="$(dirname "$(readlink -f "$0")")" j=${0}', ("k=/a/b/c",
         "j=/a/b/c/run.sh")),
        ("python -m verl.x k=$(dirname x) j=$(dirname /) i=$(dirname a/b/)", ("k=.", "j=/",
         "i=a")),
        # any other command stays as written, one field however many blanks it holds
        ("D=$(date +%s)\npython -m verl.x k=$D", ("k=$(date +%s)",)),
        ("R=$(dirname $(git rev-parse x))\npython -m verl.x k=$R/m", ("k=$(dirname $(git "
         "rev-parse x))/m",)),
        ("python -m verl.x k=$(cd rel && pwd)", ("k=$(cd rel && pwd)",)),  # no $(pwd) known
    ],
)  # fmt: skip
def test_path_commands(text: str, expected: tuple[str, ...]) -> None:
    assert read_launch(text, file="/a/b/c/run.sh").overrides == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # found in a second review (2026-11-29), each as bash prints it
        ("python -m verl.x k=$(cd /d/run2>/dev/null && pwd)", ("k=/d/run2",)),  # no fd 2
        ("python -m verl.x k=$(basename /a/b.sh b.sh)", ("k=b.sh",)),  # nothing left: kept
        ("python -m verl.x k=$(realpath --relative-to=/a /a/b/c)",
         ("k=$(realpath --relative-to=/a /a/b/c)",)),  # a relative answer: not worked out
        ("python -m verl.x k=$(readlink /a/b)", ("k=$(readlink /a/b)",)),  # a link's target
    ],
)  # fmt: skip
def test_path_commands_as_bash_prints_them(text: str, expected: tuple[str, ...]) -> None:
    assert read_launch(text, file="/a/b/c/run.sh").overrides == expected


def test_symbolic_links_are_followed_where_the_command_follows_them(tmp_path: Path) -> None:
    """``realpath``, ``readlink -f`` and ``cd -P`` resolve a script reached through a link to
    its real checkout; ``dirname`` and a plain ``cd`` keep the link's path."""
    real = tmp_path / "real" / "examples"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    script = tmp_path / "link" / "run.sh"
    text = (
        'R=$(dirname "$(realpath "$0")")\nF=$(dirname "$(readlink -f "$0")")\n'
        'P=$(cd -P "$(dirname "$0")" && pwd)\nL=$(cd "$(dirname "$0")" && pwd)\n'
        "python -m verl.x r=$R f=$F p=$P l=$L\n"
    )
    real_path = real.resolve()
    assert read_launch(text, file=str(script)).overrides == (
        f"r={real_path}",
        f"f={real_path}",
        f"p={real_path}",
        f"l={tmp_path / 'link'}",
    )


@pytest.mark.parametrize(
    ("command", "what"),
    [
        ("python3 -m verl.trainer.main_generation_server", "a verl generation run"),
        ("torchrun --nproc-per-node=8 -m verl.trainer.sft_trainer", "a verl SFT run"),
        ("python3 -m verl.trainer.main_ppo trainer.val_only=True", "a verl validation-only run"),
    ],
)
def test_a_script_that_trains_no_rl_step_is_refused(
    tmp_path: Path, command: str, what: str
) -> None:
    """Found in review (2026-11-29): main_generation_server reads ppo_trainer.yaml and
    loaded as a PPO step; so did a validation-only run."""
    script = verl_tree(tmp_path) / "run.sh"
    script.write_text(f"{command} trainer.n_gpus_per_node=8 algorithm.adv_estimator=grpo\n")
    with pytest.raises(ConfigError) as info:
        load_config(script)
    assert f"this is {what}" in str(info.value) and "not an RL training step" in str(info.value)


def test_deep_nesting_is_no_crash() -> None:
    text = "python -m verl.x k=" + "${A:-" * 2000 + "1" + "}" * 2000
    assert read(text)[0].startswith("k=")


def test_config_path_and_name_flags() -> None:
    launch = read_launch(
        "python3 -m recipe.dapo.main_dapo --config-path=config --config-name='dapo.yaml' k=1",
        file="run.sh",
    )
    assert (launch.module, launch.config_path, launch.config_name) == (
        "recipe.dapo.main_dapo", "config", "dapo.yaml",
    )  # fmt: skip
    short = read_launch("python -m verl.x -cp /abs -cn other k=1", file="run.sh")
    assert (short.config_path, short.config_name, short.overrides) == ("/abs", "other", ("k=1",))
    program = read_launch("python3 verl/trainer/main_ppo.py k=1", file="run.sh")
    assert program.module is None and program.program == "verl/trainer/main_ppo.py"


def test_a_script_without_a_verl_run_is_refused() -> None:
    with pytest.raises(ConfigError, match="runs no verl trainer") as info:
        read_launch("python3 preprocess.py\npython3 -m other.main k=1\n", file="run.sh")
    assert info.value.file == "run.sh"


def test_pwd_is_the_checkout_the_module_lives_in(tmp_path: Path) -> None:
    examples = verl_tree(tmp_path)
    script = examples / "run.sh"
    script.write_text(
        'PROJECT_DIR="$(pwd)"\n'
        'python3 -m verl.trainer.main_ppo --config-path="$PROJECT_DIR/verl/trainer/config"'
        " trainer.n_gpus_per_node=4 trainer.default_local_dir=$PWD/ckpt\n"
    )
    config, overrides = launch_config(script)
    assert config == tmp_path / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    assert overrides == ("trainer.n_gpus_per_node=4", f"trainer.default_local_dir={tmp_path}/ckpt")
    assert is_launch_script(script) and not is_launch_script(config)


SCRIPT = """\
#!/bin/bash
N=8
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=128 \\
    actor_rollout_ref.rollout.n=$N \\
    trainer.project_name='x' \\
    trainer.n_gpus_per_node=8 trainer.nnodes=1 $@
"""


def test_a_script_loads_as_its_config_with_its_overrides(tmp_path: Path) -> None:
    script = verl_tree(tmp_path) / "run.sh"
    script.write_text(SCRIPT)
    base = tmp_path / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    via_script = load_config(script, overrides=["cluster.gpu=h100"])
    by_hand = load_config(
        base,
        overrides=[
            "algorithm.adv_estimator=grpo", "data.train_batch_size=128",
            "actor_rollout_ref.rollout.n=8", "trainer.project_name=x",
            "trainer.n_gpus_per_node=8", "trainer.nnodes=1", "cluster.gpu=h100",
        ],
    )  # fmt: skip
    assert via_script.workload == by_hand.workload
    assert via_script.roles == by_hand.roles
    assert via_script.workload is not None and via_script.workload.samples_per_prompt == 8
    assert via_script.source == str(script)
    # Relative paths start where the script runs: the checkout holding verl ($(pwd)).
    assert via_script.base_dir == str(tmp_path)
    # The script's own overrides are never "unread"; the user's --set still is checked.
    assert not [w for w in via_script.warnings if "changed nothing" in w]
    unread = load_config(script, overrides=["cluster.gpu=h100", "trainer.project_name=y"])
    assert any("--set trainer.project_name=y changed nothing" in w for w in unread.warnings)
    # --set goes over the script's overrides.
    more = load_config(script, overrides=["cluster.gpu=h100", "actor_rollout_ref.rollout.n=4"])
    assert more.workload is not None and more.workload.samples_per_prompt == 4


@pytest.mark.parametrize(
    ("override", "read"),
    [
        ("a.b=FALSE", "a.b=false"), ("a.b=tRuE", "a.b=true"), ("a.b=Null", "a.b=null"),
        ("a.b=no", "a.b='no'"), ("+a.b=off", "+a.b='off'"), ("a.b=YES", "a.b='YES'"),
        ("a.b=nope", "a.b=nope"), ("a.b=1", "a.b=1"),
    ],
)  # fmt: skip
def test_override_values_are_spelled_as_hydra_reads_them(override: str, read: str) -> None:
    """Hydra's override grammar: ``true``/``false``/``null`` in any case are a bool and null,
    ``no``/``off``/``yes`` strings (YAML, which reads the overrides here, made them bools)."""
    assert hydra_value(override) == read


def test_a_switch_hydra_reads_as_a_string_is_refused(tmp_path: Path) -> None:
    """``enforce_eager=off``: the string 'off' to Hydra, which verl tests for truth (eager);
    rlplex read it as false (CUDA graphs). ``=False`` is false to both."""
    script = verl_tree(tmp_path) / "run.sh"
    field = "actor_rollout_ref.rollout.enforce_eager"
    script.write_text(SCRIPT.replace("trainer.nnodes=1", f"trainer.nnodes=1 {field}=False"))
    assert load_config(script).roles["actor_infer"].rollout.cuda_graphs is True
    script.write_text(SCRIPT.replace("trainer.nnodes=1", f"trainer.nnodes=1 {field}=off"))
    with pytest.raises(InvalidValueError) as info:
        load_config(script)
    assert str(info.value).startswith(f"{script}: {field}: must be true or false")
    assert info.value.value == "off"


def test_errors_name_the_script(tmp_path: Path) -> None:
    script = verl_tree(tmp_path) / "run.sh"
    script.write_text(SCRIPT.replace("trainer.nnodes=1", "trainer.nnodes=0"))
    with pytest.raises(ConfigError) as info:
        load_config(script)
    error = info.value
    assert error.file == str(script) and error.field == "trainer.nnodes"
    assert "(verl's ppo_trainer.yaml with the script's overrides)" in error.message
    result = CliRunner().invoke(app, ["estimate", str(script), "--set", "cluster.gpu=h100"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert str(script) in result.output
    # An override of the script's own that its config cannot take says so (not "--set").
    script.write_text(SCRIPT.replace("trainer.nnodes=1", "trainer.nnodes.x=1"))
    with pytest.raises(ConfigError, match="the script's override: cannot set") as info:
        load_config(script)
    assert info.value.file == str(script) and info.value.field is None


def test_a_module_or_config_that_is_not_there_is_named(tmp_path: Path) -> None:
    lone = tmp_path / "run.sh"
    lone.write_text("python3 -m verl.trainer.main_ppo k=1\n")
    with pytest.raises(ConfigError, match="neither in a folder above the script") as info:
        load_config(lone)
    assert info.value.value == "verl.trainer.main_ppo" and info.value.file == str(lone)
    script = verl_tree(tmp_path / "checkout") / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo --config-name=missing k=1\n")
    with pytest.raises(ConfigError, match=r"missing\.yaml does not exist"):
        load_config(script)
    unreadable = tmp_path / "bad.sh"
    unreadable.write_bytes(b"\xff\xfe python3")
    with pytest.raises(ConfigError, match=r"UTF-8"):
        load_config(unreadable)


def test_every_command_reads_a_script(tmp_path: Path) -> None:
    """Bugs found in review (2026-11-29): a model too big for its GPU crashed the not-fit
    report of a script (it read the script as YAML); --sweep refused a key the script's
    Hydra config holds; viz took a script for a record."""
    script = verl_tree(tmp_path) / "run.sh"
    script.write_text(SCRIPT)
    runner = CliRunner()
    h100 = ("--set", "cluster.gpu=h100")
    model = "actor_rollout_ref.model.path=Qwen/Qwen2.5-72B"
    big = runner.invoke(app, ["estimate", str(script), *h100, "--set", model])
    assert big.exit_code == 2 and "Traceback" not in big.output, big.output
    assert "does not fit" in big.output or "GB" in big.output
    sweep = "actor_rollout_ref.rollout.n=4,8"
    swept = runner.invoke(app, ["estimate", str(script), *h100, "--sweep", sweep, "--json"])
    assert swept.exit_code == 0, swept.output
    assert [p["value"] for p in json.loads(swept.stdout)["points"]] == [4, 8]
    drawn = runner.invoke(app, ["viz", str(script), "--set", "cluster.gpu=h100",
                                "--gantt", str(tmp_path / "t.html")])  # fmt: skip
    assert drawn.exit_code == 0, drawn.output
    assert (tmp_path / "t.html").read_text().startswith("<!")


def test_import_corpus_reads_launch_scripts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/import_corpus.py counts launch scripts as their own framework, with --set."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location(
        "import_corpus", Path(__file__).resolve().parents[2] / "bench" / "import_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    examples = verl_tree(tmp_path)
    (examples / "run.sh").write_text(SCRIPT)
    (examples / "prep.sh").write_text("python3 preprocess.py --out data/\n")
    out = tmp_path / "rows.json"
    argv = [str(examples), "--set", "cluster.gpu=h100", "--json", str(out)]
    assert module.main(argv) == 0
    # a script that starts no verl run is not a config: unrecognised, not refused
    assert "| verl script | 2 | 1 | 0 | 0 | 1 | 0 | 0 |" in capsys.readouterr().out
    rows = {Path(r["file"]).name: r for r in json.loads(out.read_text())}
    assert rows["run.sh"]["roles"].startswith("actor_train:8/1")
    assert "runs no verl trainer" in rows["prep.sh"]["reason"]


def test_an_openrlhf_command_keeps_its_words() -> None:
    launch = read_launch(
        'MODEL=Qwen/Qwen3-4B\nray job submit --address="http://127.0.0.1:8265" \\\n'
        "   -- python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path $MODEL \\\n"
        "   --train.colocate_all --eval.steps -1 2>&1 | tee log.txt\n",
        file="run.sh",
    )
    assert (launch.module, launch.line, launch.overrides) == ("openrlhf.cli.train_ppo_ray", 2, ())
    assert launch.arguments == (
        "--actor.model_name_or_path", "Qwen/Qwen3-4B", "--train.colocate_all", "--eval.steps",
        "-1", "2>",
    )  # fmt: skip
    program = read_launch("python openrlhf/cli/train_ppo_ray.py --x 1\n", file="run.sh")
    assert program.module == "openrlhf.cli.train_ppo_ray" and program.arguments == ("--x", "1")
    sft = read_launch("deepspeed --num_gpus 8 --module openrlhf.cli.train_sft --a 1\n", file="r.sh")
    assert sft.module == "openrlhf.cli.train_sft"


def test_flag_arguments_as_argparse_takes_them() -> None:
    words = [
        "--a", "1", "--b=2", "--switch", "--pair", "0.2", "0.27", "--neg", "-1", "--a", "3",
        "--last", "x", ">", "log.txt", "2>",
    ]  # fmt: skip
    assert flag_arguments(words) == {
        "a": "3", "b": "2", "switch": True, "pair": ["0.2", "0.27"], "neg": "-1", "last": "x",
    }  # fmt: skip


def test_a_command_inside_bash_c_is_found() -> None:
    launch = read_launch(
        'srun --overlap -w "$node_1" bash -c "pip install ray \\\n'
        '&& ray job submit --runtime-env-json=\'{\\"working_dir\\": \\"/openrlhf\\"}\' \\\n'
        "    -- python3 -m openrlhf.cli.train_ppo_ray \\\n    --actor.num_nodes 2 \\\n"
        '    --logger.wandb.key {token}" &>> log\n',
        file="slurm.sh",
    )
    # a backslash-newline inside double quotes is no character, as the shell reads it
    assert launch.arguments == ("--actor.num_nodes", "2", "--logger.wandb.key", "{token}")


def test_a_here_document_read_into_a_variable() -> None:
    launch = read_launch(
        "X=4\nread -r -d '' commands <<EOF\nopenrlhf.cli.train_dpo \\\n   --ds.zero_stage $X\nEOF\n"
        "cat > notes.py << 'END'\npython3 -m verl.trainer.main_ppo a=1\nEND\n"
        "deepspeed --module $commands\n",
        file="dpo.sh",
    )
    # the second document is a file's text, not commands: its verl line is not the run
    assert (launch.module, launch.arguments, launch.line) == (
        "openrlhf.cli.train_dpo", ("--ds.zero_stage", "4"), 9,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Found in review (2026-11-30): a blank ending an unquoted expansion made an empty
        # word, read as one more value of the flag before it (--c ['3', ''])
        ('X=" --c 3 "\npython3 -m openrlhf.cli.train_ppo_ray --a 1 $X --b', ("--c", "3", "--b")),
        ('X=" "\npython3 -m openrlhf.cli.train_ppo_ray --a 1 $X --b', ("--b",)),
        ('X="--c 3 "\npython3 -m openrlhf.cli.train_ppo_ray --a 1 ${X}y', ("--c", "3", "y")),
        # quoted, the blank is the word's
        ('X="--c 3 "\npython3 -m openrlhf.cli.train_ppo_ray --a 1 "$X"', ("--c 3 ",)),
    ],
)
def test_a_blank_ending_an_expansion_starts_no_word(text: str, expected: tuple[str, ...]) -> None:
    assert read_launch(text, file="run.sh").arguments[2:] == expected


def test_an_unknown_expansion_after_a_value_is_no_value() -> None:
    """``$EXTRA_ARGS``, which the script does not set, may stand for more flags: not one more
    value of the flag before it (found in review, 2026-11-30)."""
    words = ["--a", "1", "$EXTRA_ARGS", "--model", "$MODEL", "--switch", "${MORE[@]}"]
    assert flag_arguments(words) == {"a": "1", "model": "$MODEL", "switch": "${MORE[@]}"}


DEVICE_CASE = """\
DEVICE=${DEVICE:-$(python3 -c 'import torch_npu' 2>/dev/null && echo npu || echo gpu)}
G=8
case "${DEVICE}" in
    gpu)
        ;;
    npu)
        G=16
        ;;
    *)
        exit 1
        ;;
esac
python3 -m verl.x k=$G
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a known word runs the first branch whose pattern matches, as bash does
        ("D=npu\ncase $D in\n  gpu)\n    G=8\n    ;;\n  npu)\n    G=16\n    ;;\nesac\n"
         "python -m verl.x k=$G", ("k=16",)),
        ("D=xpu\ncase $D in gpu) G=8 ;; *) G=1 ;; esac\npython -m verl.x k=$G", ("k=1",)),
        ("D=gpu\ncase $D in gpu) G=8 ;; *) G=1 ;; esac\npython -m verl.x k=$G", ("k=8",)),
        ("D=npu\ncase $D in\n  gpu|npu) G=8;;\n  *) G=1;;\nesac\npython -m verl.x k=$G",
         ("k=8",)),
        ("D=npu\ncase $D in\n  gpu | npu ) G=8 ;;\nesac\npython -m verl.x k=$G", ("k=8",)),
        ("D=h200\ncase $D in\n  (h1??) G=1 ;;\n  h[0-9]*) G=2 ;;\nesac\npython -m verl.x k=$G",
         ("k=2",)),
        ("D=a\ncase $D in\n  b) G=1 ;;\nesac\npython -m verl.x k=${G:-none}", ("k=none",)),
        # the last branch may leave its ;; out; a ; inside a branch does not end it
        ("D=b\ncase $D in\n  a) G=1 ;;\n  b) G=2; H=3\nesac\npython -m verl.x k=$G j=$H",
         ("k=2", "j=3")),
        # an if inside a branch is followed there, and skipped with the branch
        ("D=gpu\nM=gb200\ncase $D in\n  gpu)\n    if [ $M = gb200 ]; then G=4; else G=8; fi\n"
         "    ;;\n  npu) G=16 ;;\nesac\npython -m verl.x k=$G", ("k=4",)),
        ("D=npu\ncase $D in\n  gpu)\n    if [ 1 = 1 ]; then G=4; fi\n    ;;\nesac\nG=${G:-0}\n"
         "python -m verl.x k=$G", ("k=0",)),
        # a case inside a branch
        ("D=gpu\nM=h\ncase $D in\n gpu)\n  case $M in h) G=1;; *) G=2;; esac\n  ;;\nesac\n"
         "python -m verl.x k=$G", ("k=1",)),
        # a word not known: every branch's assignments stay as written
        (DEVICE_CASE, ("k=$G",)),
        ("case $DEVICE in gpu) G=8 ;; esac\npython -m verl.x k=$G", ("k=$G",)),
        # a pattern not known before the one that matches: which branch ran is not known
        ("D=a\ncase $D in\n  $P) G=1 ;;\n  a) G=2 ;;\nesac\npython -m verl.x k=$G", ("k=$G",)),
        ("D=a\ncase $D in\n  a|$P) G=1 ;;\nesac\npython -m verl.x k=$G", ("k=1",)),
        # ;& runs on into the next branch: not followed
        ("D=a\ncase $D in\n  a) G=1 ;&\n  b) G=2 ;;\nesac\npython -m verl.x k=$G", ("k=$G",)),
    ],
)  # fmt: skip
def test_case_branches(text: str, expected: tuple[str, ...]) -> None:
    assert read(text) == expected


def test_an_elif_after_a_test_not_followed_is_not_taken_for_sure() -> None:
    """Found while adding `case` (2026-12): a true ``elif`` after an ``if`` whose test is not
    followed was taken as the branch that runs, though the first might have run instead."""
    text = "if grep -q a b; then X=1\nelif [ 1 = 2 ]; then X=2\nelif [ 1 = 1 ]; then X=3\nfi\n"
    assert read(text + "python -m verl.x k=$X") == ("k=$X",)


def test_a_case_word_not_known_names_the_variable_and_the_line() -> None:
    launch = read_launch(DEVICE_CASE, file="run.sh")
    (unknown,) = launch.unknown
    assert unknown.name == "G" and unknown.inputs == ("DEVICE",)
    assert unknown.reason == (
        "inside a `case` on line 3 whose branch rlplex cannot tell (its word ${DEVICE} comes"
        " from a command rlplex does not run)"
    )
    # a variable the script takes from its environment: named as such
    (unknown,) = read_launch("case $D in a) G=1;; esac\npython -m verl.x k=$G", file="x").unknown
    assert "its word $D reads D from the environment, which the script does not set" in (
        unknown.reason
    )
    # assigned again where it runs: known again
    assert read_launch(DEVICE_CASE.replace("python3", "G=4\npython3"), file="x").unknown == ()


def test_env_gives_the_variables_a_script_starts_with() -> None:
    assert read_launch(DEVICE_CASE, file="x", env={"DEVICE": "npu"}).overrides == ("k=16",)
    assert read_launch(DEVICE_CASE, file="x", env={"DEVICE": "gpu"}).overrides == ("k=8",)
    # the script's own assignment wins over the environment, as in the shell
    assert read_launch("G=1\npython -m verl.x k=$G", file="x", env={"G": "2"}).overrides == ("k=1",)


def test_a_value_a_case_leaves_unknown_is_refused_naming_variable_and_line(
    tmp_path: Path,
) -> None:
    script = verl_tree(tmp_path) / "run.sh"
    head = DEVICE_CASE.rsplit("python3", 1)[0].replace("G=", "NGPUS=")
    script.write_text(head + SCRIPT.replace("n_gpus_per_node=8", "n_gpus_per_node=${NGPUS}"))
    with pytest.raises(ConfigError) as info:
        load_config(script)
    assert info.value.file == str(script) and info.value.field == "trainer.n_gpus_per_node"
    assert info.value.message == (
        "${NGPUS}: the script assigns NGPUS inside a `case` on line 3 whose branch rlplex cannot"
        " tell (its word ${DEVICE} comes from a command rlplex does not run); give the value"
        " with --set trainer.n_gpus_per_node=..., or the environment variable that decides it"
        " with --env DEVICE=... (rlplex reads no environment of its own)"
    )
    # DEVICE given (--env): its branch is followed
    assert load_config(script, env={"DEVICE": "gpu"}).cluster.num_gpus == 8
    assert load_config(script, env={"DEVICE": "npu"}).cluster.num_gpus == 16
    result = CliRunner().invoke(app, ["validate", str(script)])
    assert result.exit_code == 2 and "line 3" in result.output and "Traceback" not in result.output
    # the value given with --set: read
    fixed = load_config(script, overrides=["trainer.n_gpus_per_node=8"])
    assert fixed.cluster.num_gpus == 8


def test_env_unread_names_the_variables_whose_value_the_script_never_took() -> None:
    """``--env`` variables the script looks up are taken; one it never looks up, or assigns
    itself before reading (its own assignment wins, as in bash), or reads only after the
    trainer's command, is listed in ``env_unread``."""
    text = """N=${NODES:-1}
GPUS=8
python3 -m verl.trainer.main_ppo trainer.nnodes=$N trainer.n_gpus_per_node=$GPUS
echo $LATE
"""
    env = {"NODES": "2", "GPUS": "4", "TYPO": "x", "LATE": "y"}
    launch = read_launch(text, file="run.sh", env=env)
    assert (
        "trainer.nnodes=2" in launch.overrides and "trainer.n_gpus_per_node=8" in launch.overrides
    )
    assert launch.env_unread == ("GPUS", "TYPO", "LATE")
    assert read_launch(text, file="run.sh").env_unread == ()
