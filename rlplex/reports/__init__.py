"""The workflows that combine the layers: each returns a result object the CLI renders.

This floor sits between the library (dag, resources, estimate, config, plan,
timeline, sim, runtime, viz, pipelines) and the ``rlplex`` command, so that the
packages below it import only downward (DESIGN.md, "Package layout"):

- :mod:`~rlplex.reports.plan`: ``rlplex plan`` (placement, plan, figures, peaks);
- :mod:`~rlplex.reports.records`: ``rlplex replay`` / ``whatif`` and loading a record;
- :mod:`~rlplex.reports.calibrate`: ``rlplex calibrate`` (fit figures to a record);
- :mod:`~rlplex.reports.run`: the body of ``rlplex run`` (importing it never touches Ray);
- :mod:`~rlplex.reports.sweep`: ``rlplex estimate --sweep`` (plan a config over a range of
  one input);
- :mod:`~rlplex.reports.misfit`: what does not fit, by how much, and what would fix it;
- :mod:`~rlplex.reports.size`: ``rlplex size`` (GPU counts, types, placements and modes).

Nothing here prints or draws progress: long work reports through callbacks.
"""
