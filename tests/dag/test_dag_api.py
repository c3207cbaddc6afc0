"""The Python pipeline API: bad values are RlplexErrors naming the stage and field, ``after``
and ``needs`` take one name as a string, which parameters are dependencies, decorating twice,
collecting stages from a module, and which stage names are refused."""

from __future__ import annotations

import math
import sys
import textwrap
import types
from pathlib import Path

import pytest

import rlplex
from rlplex.config import load_config
from rlplex.dag import (
    DuplicateStageError,
    PipelineBuilder,
    PipelineError,
    Stage,
    StageDefinitionError,
    define_pipeline,
    stage,
    weight_sync,
)
from rlplex.dag.export import to_dot, to_mermaid
from rlplex.errors import ConfigError, InvalidValueError, RlplexError

# --- 1. bad values are RlplexErrors naming the stage and the field ---------------------------


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"seconds": -1},
            "seconds",
            "stage 'generate': seconds: must be greater than or equal to 0 (got -1)",
        ),
        (
            {"seconds": math.nan},
            "seconds",
            "stage 'generate': seconds: must be a finite number (got nan)",
        ),
        (
            {"seconds": math.inf},
            "seconds",
            "stage 'generate': seconds: must be a finite number (got inf)",
        ),
        (
            {"seconds": 1, "kind": "trian"},
            "kind",
            "stage 'generate': kind: must be 'run', 'train' or 'weight_sync' (got 'trian')",
        ),
        (
            {"seconds": 1, "memory_gb": -2.0},
            "memory_gb",
            "stage 'generate': memory_gb: must be greater than or equal to 0 (got -2.0)",
        ),
    ],
)
def test_decorator_and_builder_bad_value_names_stage_and_field(fields, field, message) -> None:
    with pytest.raises(StageDefinitionError) as info:
        stage(role="a", name="generate", **fields)(lambda: None)
    assert str(info.value) == message
    assert isinstance(info.value, RlplexError)
    assert (info.value.stage, info.value.field) == ("generate", field)

    with pytest.raises(StageDefinitionError) as info:
        PipelineBuilder().stage("generate", role="a", **fields)
    assert str(info.value) == message


def test_weight_sync_bad_value_names_stage_and_field() -> None:
    with pytest.raises(StageDefinitionError, match=r"^stage 'sync': seconds: must be greater"):
        PipelineBuilder().weight_sync("sync", from_="t", to="i", seconds=-1)

    def sync(): ...

    with pytest.raises(StageDefinitionError, match=r"^stage 'sync': seconds: must be a finite"):
        weight_sync(from_="t", to="i", seconds=math.inf)(sync)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "Async"}, "mode: must be 'sync' or 'async' (got 'Async')"),
        ({"max_staleness": -1}, "max_staleness: must be greater than or equal to 0 (got -1)"),
    ],
)
def test_bad_pipeline_setting_is_an_invalid_value(kwargs, message) -> None:
    with pytest.raises(InvalidValueError) as info:
        PipelineBuilder(**kwargs)
    assert str(info.value) == message

    @stage(role="a", seconds=1)
    def generate(): ...

    with pytest.raises(InvalidValueError) as info:
        define_pipeline(generate, **kwargs)
    assert str(info.value) == message


def test_python_pipeline_with_bad_stage_value_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(
        textwrap.dedent(
            """\
            import rlplex

            def make():
                @rlplex.stage(role="actor_train", seconds=-1)
                def generate(): ...
                return rlplex.define_pipeline(generate)
            """
        )
    )
    config = tmp_path / "c.yaml"
    config.write_text(
        "cluster: {nodes: 1, gpus_per_node: 8, gpu_memory_gb: 80}\n"
        'roles: {actor_train: {devices: "0-7", states: {weights: 4}}}\n'
        'pipeline: {python: "bad.py:make"}\n'
    )
    with pytest.raises(ConfigError) as info:
        load_config(config)
    text = str(info.value)
    assert (
        "bad.py:4 (in make): stage 'generate': seconds: must be greater than or equal to 0"
        " (got -1)" in text
    )
    assert "validation error" not in text
    assert "\n" not in text


# --- 2. a string as after or needs is one name -----------------------------------------------


def test_string_after_and_needs_are_one_name() -> None:
    b = PipelineBuilder()
    gen = b.stage("gen", role="a", seconds=1)
    b.stage("x", role="a", seconds=1, after=gen, needs="weights")
    b.weight_sync(from_="a", to="b", after="x")
    p = b.build()
    assert p.stage("x").after == ("gen",)
    assert p.stage("x").needs == ("weights",)
    assert p.stage("weight_sync").after == ("x",)

    @stage(role="a", seconds=1, needs="weights")
    def old_logprob(): ...

    assert define_pipeline(old_logprob).stage("old_logprob").needs == ("weights",)


def test_after_that_is_not_a_list_is_refused() -> None:
    with pytest.raises(StageDefinitionError, match=r"^stage 'x': after: must be a name or a list"):
        PipelineBuilder().stage("x", role="a", seconds=1, after=5)  # type: ignore[arg-type]


# --- 3. which parameters are dependencies ----------------------------------------------------


def test_var_args_and_kwargs_are_not_dependencies() -> None:
    @stage(role="a", seconds=1)
    def generate(ctx): ...

    @stage(role="a", seconds=1)
    def reward(generate, *args, **kwargs): ...

    p = define_pipeline(generate, reward)
    assert p.stage("reward").after == ("generate",)


def test_parameter_with_default_is_an_optional_upstream() -> None:
    @stage(role="a", seconds=1)
    def generate(): ...

    @stage(role="a", seconds=1)
    def values(generate): ...

    @stage(role="a", seconds=1)
    def advantage(generate, values=None, temperature=1.0, *, scale=2): ...

    # values is a stage of this pipeline: advantage runs after it; temperature is not a stage.
    assert define_pipeline(generate, values, advantage).stage("advantage").after == (
        "generate",
        "values",
    )
    # Without a values stage (GRPO), advantage keeps its default.
    assert define_pipeline(generate, advantage).stage("advantage").after == ("generate",)


def test_keyword_only_parameter_is_a_dependency() -> None:
    @stage(role="a", seconds=1)
    def generate(): ...

    @stage(role="a", seconds=1)
    def reward(*, generate): ...

    assert define_pipeline(generate, reward).stage("reward").after == ("generate",)


def test_positional_only_parameter_without_default_is_refused() -> None:
    def reward(generate, /): ...

    with pytest.raises(StageDefinitionError, match="positional-only parameter 'generate'"):
        stage(role="a", seconds=1)(reward)


# --- 4. decorating twice ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "outer",
    [stage(role="b", seconds=2), weight_sync(from_="a", to="b")],
    ids=["stage", "weight_sync"],
)
def test_decorating_a_stage_again_is_refused(outer) -> None:
    @stage(role="a", seconds=1)
    def generate(): ...

    with pytest.raises(StageDefinitionError, match=r"function '.*generate' is already the stage"):
        outer(generate)
    assert define_pipeline(generate).stage("generate").role == "a"


# --- 5. stages collected from a module -------------------------------------------------------


def _module(name: str, source: str, **extra: object) -> types.ModuleType:
    module = types.ModuleType(name)
    vars(module).update(extra)
    exec(textwrap.dedent(source), vars(module))  # defined by exec: no source lines
    return module


def test_module_aliases_and_imports_count_once() -> None:
    first = _module(
        "rlplex_test_first",
        """\
        import rlplex

        @rlplex.stage(role="a", seconds=1)
        def generate(): ...

        gen_alias = generate
        """,
    )
    second = _module(
        "rlplex_test_second",
        """\
        import rlplex

        @rlplex.stage(role="a", seconds=1)
        def reward(generate): ...
        """,
        generate=first.generate,  # as `from first import generate`
    )
    p = define_pipeline(first, second)
    assert p.names == ("generate", "reward")
    assert define_pipeline(second).names == ("generate", "reward")
    assert define_pipeline(first, first.generate).names == ("generate",)


def test_module_defined_by_exec_keeps_definition_order() -> None:
    module = _module(
        "rlplex_test_exec",
        """\
        import rlplex

        @rlplex.stage(role="a", seconds=1)
        def zeta(): ...

        @rlplex.stage(role="a", seconds=1)
        def alpha(zeta): ...
        """,
    )
    assert define_pipeline(module).names == ("zeta", "alpha")


def test_module_from_a_file_keeps_source_order(tmp_path: Path) -> None:
    (tmp_path / "rlplex_test_file_stages.py").write_text(
        textwrap.dedent(
            """\
            import rlplex

            @rlplex.stage(role="a", seconds=1)
            def zeta(): ...

            @rlplex.stage(role="a", seconds=1)
            def alpha(zeta): ...

            beta = alpha
            """
        )
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import rlplex_test_file_stages as module  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("rlplex_test_file_stages", None)
    assert define_pipeline(module).names == ("zeta", "alpha")


def test_module_importing_stages_orders_them_by_file_not_by_line_number(tmp_path: Path) -> None:
    # The imported stages sit further down their own file than the module's stage does in
    # its file; comparing the two files' line numbers put `train` first.
    (tmp_path / "rlplex_test_helper_stages.py").write_text(
        textwrap.dedent(
            """\
            import rlplex

            # padding lines, so that these stages sit below the importing module's
            #
            #
            #

            @rlplex.stage(role="a", seconds=1)
            def generate(): ...

            @rlplex.stage(role="a", seconds=1)
            def reward(generate): ...
            """
        )
    )
    (tmp_path / "rlplex_test_main_stages.py").write_text(
        textwrap.dedent(
            """\
            import rlplex
            from rlplex_test_helper_stages import reward, generate
            @rlplex.stage(role="a", seconds=1)
            def train(reward): ...
            """
        )
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import rlplex_test_main_stages as module  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("rlplex_test_main_stages", None)
        sys.modules.pop("rlplex_test_helper_stages", None)
    assert define_pipeline(module).names == ("generate", "reward", "train")


def test_two_functions_with_one_name_are_still_duplicates() -> None:
    @stage(role="a", seconds=1, name="generate")
    def one(): ...

    @stage(role="a", seconds=1, name="generate")
    def two(): ...

    with pytest.raises(DuplicateStageError):
        define_pipeline(one, two)


# --- 6. stage names --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["", "a/b", "a b", "gen\n", "it's", 'say"hi"', "a:b", "<lambda>", "\t"]
)
def test_stage_name_that_is_not_a_plain_token_is_refused(name) -> None:
    with pytest.raises(StageDefinitionError) as info:
        PipelineBuilder().stage(name, role="a", seconds=1)
    assert str(info.value).startswith(f"stage {name!r}: name: must hold only letters, digits")
    assert info.value.field == "name"

    with pytest.raises(StageDefinitionError):
        stage(role="a", seconds=1, name=name)(lambda: None)

    with pytest.raises(ValueError, match="must hold only letters"):
        Stage(name=name, role="a")


@pytest.mark.parametrize(
    "name",
    [
        "generate",
        "weight_sync_inference",
        "reward_math-rule",
        "ref_logprob.teacher",
        "ref_logprob_teacher_math",
        "0",
        "génère",
    ],
)
def test_plain_stage_names_are_accepted(name) -> None:
    b = PipelineBuilder()
    b.stage(name, role="a", seconds=1)
    p = b.build()
    assert p.names == (name,)
    assert f'"{name}"' in to_dot(p)
    assert to_mermaid(p)


def test_yaml_stage_name_is_refused_under_its_field(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "cluster: {nodes: 1, gpus_per_node: 8, gpu_memory_gb: 80}\n"
        'roles: {actor_train: {devices: "0-7", states: {weights: 4}}}\n'
        'pipeline: {stages: {"gen erate": {role: actor_train, seconds: 1}}}\n'
    )
    with pytest.raises(InvalidValueError) as info:
        load_config(config)
    assert info.value.field == "pipeline.stages.gen erate.name"
    assert "must hold only letters, digits" in str(info.value)


def test_stage_definition_error_is_a_pipeline_error() -> None:
    assert issubclass(StageDefinitionError, PipelineError)
    assert rlplex.dag.StageDefinitionError is StageDefinitionError
