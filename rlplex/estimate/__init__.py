"""Estimated costs: stage seconds and state GB from the model, the batch and the GPU.

A config that names a ``model``, a ``workload`` and a ``cluster.gpu`` need not
type every stage's ``seconds`` or every role's ``states``: this package
estimates them (see ``docs/cost-model.md``). Given figures always win.
:mod:`rlplex.resources.inputs` holds the config sections it reads.
"""
