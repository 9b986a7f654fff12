"""The evaluation grid: one agent and holdout played under every combination of policies,
inference settings and agent settings, and the table every result is reported in.

- :mod:`~agent_kit.evaluation.grid`: the grid's spec (axes, cells, cell ids, the base run
  settings every cell shares), parsed from ``--policy`` / ``--grid`` / ``--samples``;
- :mod:`~agent_kit.evaluation.figures`: a cell's figures (mean reward ± SE, success rate,
  pass@k, turns, tokens, cost, state, each prompt's mean) and the difference of two cells,
  paired by prompt (:mod:`agent_kit.reporting.paired`), as pure functions, over
  :mod:`~agent_kit.evaluation.rollouts` (the tool-call rate, the token limit, rollouts cut
  early, a failure as a whole, the task's own figures);
- :mod:`~agent_kit.evaluation.table`: the grid's table (cells, their figures, the differences)
  and its JSON document, filled from any source of cell figures;
- :mod:`~agent_kit.evaluation.local_cells`: the local source: each cell a run through the
  driver (``play_cell``, the one runner) in its own run directory, resumable;
- :mod:`~agent_kit.evaluation.checkpoints`: a training run's adapters as the policies;
  :mod:`~agent_kit.evaluation.holdout`: a training run's holdout as a grid played by its live
  model (``agent-kit train --eval``);
- :mod:`~agent_kit.evaluation.job_specs`, :mod:`~agent_kit.evaluation.job_cells`: the job
  source (``--submit``): each cell a SageMaker evaluation job, at most the quota at once, its
  metrics read back, resumable from ``jobs.json``;
- :mod:`~agent_kit.evaluation.render`, :mod:`~agent_kit.evaluation.page`,
  :mod:`~agent_kit.evaluation.groups`: the terminal table and the HTML page (grouped bars with
  error bars, the checkpoint curve, the group view);
- :mod:`~agent_kit.evaluation.plan`: rollouts, tokens, cost and wall clock of a grid before it
  runs, and :mod:`~agent_kit.evaluation.power`: the difference it can detect and the prompts a
  target needs; :mod:`~agent_kit.evaluation.mlflow`: the grid as one MLflow parent run with a
  child per cell.
"""
