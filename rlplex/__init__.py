"""rlplex: plan, run and replay RL post-training steps as DAGs of stages on shared GPUs.

``import rlplex`` stays light: no torch, no ray. Those are imported lazily by
the executor and the stage implementations.
"""

from rlplex.config import Config, config_from_dict, load_config
from rlplex.dag import (
    Pipeline,
    PipelineBuilder,
    Stage,
    define_pipeline,
    stage,
    weight_sync,
)
from rlplex.errors import ConfigError, InfeasibleError, RlplexError
from rlplex.resources import Cluster, Role

__version__ = "0.1.0"

__all__ = [
    "Cluster",
    "Config",
    "ConfigError",
    "InfeasibleError",
    "Pipeline",
    "PipelineBuilder",
    "RlplexError",
    "Role",
    "Stage",
    "__version__",
    "config_from_dict",
    "define_pipeline",
    "load_config",
    "stage",
    "weight_sync",
]
