"""The step DAG: stages, pipelines, the Python definition API and exports."""

from rlplex.dag.api import (
    PipelineBuilder,
    StageDefinitionError,
    define_pipeline,
    stage,
    weight_sync,
)
from rlplex.dag.pipeline import (
    CrossStepEdge,
    CycleError,
    DuplicateStageError,
    Pipeline,
    PipelineError,
    UnknownDependencyError,
    UnknownRoleError,
    WeightSyncError,
)
from rlplex.dag.stage import Judge, Stage

__all__ = [
    "CrossStepEdge",
    "CycleError",
    "DuplicateStageError",
    "Judge",
    "Pipeline",
    "PipelineBuilder",
    "PipelineError",
    "Stage",
    "StageDefinitionError",
    "UnknownDependencyError",
    "UnknownRoleError",
    "WeightSyncError",
    "define_pipeline",
    "stage",
    "weight_sync",
]
